// A skill the model chooses (protocol.md §18 "Custom commands and skills") against the REAL daemon: a
// skill in DSH_HOME/skills is offered in the system prompt, the model reads it with the `skill` tool,
// the panel's reducer shows that call as a tool card, and the skill's body reaches the model.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { emptyModel, reduceAll, type Item } from '../src/protocol/reducer';
import { FakeProvider, textReply, toolReply } from './fakeProvider';
import { removeTempStates, startDaemon, tempState, type TestDaemon } from './daemon';

let fake: FakeProvider;
let d: TestDaemon;

describe('a skill the model chooses', () => {
  beforeEach(async () => {
    fake = new FakeProvider();
    await fake.start();
    const dirs = tempState();
    mkdirSync(join(dirs.state, 'skills', 'style'), { recursive: true });
    writeFileSync(join(dirs.state, 'skills', 'style', 'SKILL.md'), "---\nname: style\ndescription: The person's code style\n---\nUse tabs. Never semicolons.\n");
    d = await startDaemon(fake.baseUrl, dirs);
  });
  afterEach(async () => {
    await d.stop();
    await fake.stop();
    removeTempStates();
  });

  it('is offered, read with the skill tool, shown as its card, and its body reaches the model', async () => {
    fake.script(toolReply([{ id: 'c1', name: 'skill', args: { name: 'style' } }]), textReply('Styled.'));
    const { sessionId } = await d.client.newSession({ cwd: d.root });
    await d.client.followup(sessionId, 'tidy this up');
    await d.waitFor(() => d.of(sessionId, 'turn/end').length === 1, 'the turn end');
    expect(JSON.stringify(fake.requests[0].body.messages[0])).toContain("- style: The person's code style");
    expect(JSON.stringify(fake.requests[1].body.messages.at(-1))).toContain('Use tabs. Never semicolons.');
    const model = reduceAll(emptyModel(sessionId), d.of(sessionId).map((event) => ({ kind: 'event' as const, event })));
    const cards = model.items.filter((item: Item) => item.kind === 'tool');
    expect(cards.map((c) => (c.kind === 'tool' ? [c.name, c.args] : null))).toEqual([['skill', { name: 'style' }]]);
  });
});
