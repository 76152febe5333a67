// "dsh: Run Agent…" (src/agents.ts) against the REAL daemon: before any session the quick pick lists
// the workspace folder's named agents (`dsh/agents/list {cwd}`) with what each does, its tool set and
// model; the one picked gets a task from an input box, sent as the delegation prompt, and the
// model's `run_subagent {agent}` runs that agent with its instructions. The words sent are the ones
// the daemon's Python writes (dsh_daemon/model/named_agents.py). A folder without agents says so;
// a dismissed pick or input box sends nothing.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { delegationPrompt, runAgent, type AgentsHost } from '../src/agents';
import { PYTHON, REPO, removeTempStates, startDaemon, tempState, type TestDaemon } from './daemon';
import { FakeProvider, textReply, toolReply } from './fakeProvider';
import { infos, input, pick } from './vscode.mock';

let fake: FakeProvider;
let d: TestDaemon;

const REVIEWER = '---\ndescription: Reviews a change for bugs\ntools: explore\n---\nREVIEWER-INSTRUCTIONS: be strict.\n';
const FIXER = '---\ndescription: Fixes failing tests\ntools: edit\nmodel: deepseek-v4-pro\n---\nFix it.\n';

function pythonPrompt(name: string, task: string): string {
  const code = 'import sys; from dsh_daemon.model.named_agents import delegation_prompt as p; sys.stdout.write(p(sys.argv[1], sys.argv[2]))';
  return execFileSync(PYTHON, ['-c', code, name, task], { cwd: REPO, encoding: 'utf8' });
}

/** The host as the extension wires it, with the chat's session made on the first prompt. */
function host(sent: string[]): AgentsHost & { session?: string } {
  const h: AgentsHost & { session?: string } = {
    client: async () => d.client,
    sessionId: () => h.session,
    cwd: () => d.root,
    prompt: async (text) => {
      h.session ??= (await d.client.newSession({ cwd: d.root })).sessionId;
      sent.push(text);
      await d.client.followup(h.session, text);
    },
    focusChat: async () => undefined,
  };
  return h;
}

describe('dsh: Run Agent…', () => {
  beforeEach(async () => {
    fake = new FakeProvider();
    await fake.start();
    const dirs = tempState();
    mkdirSync(join(dirs.root, '.dsh', 'agents'), { recursive: true });
    writeFileSync(join(dirs.root, '.dsh', 'agents', 'reviewer.md'), REVIEWER);
    writeFileSync(join(dirs.root, '.dsh', 'agents', 'fixer.md'), FIXER);
    d = await startDaemon(fake.baseUrl, dirs);
    infos.length = 0;
    input.asked.length = 0;
  });
  afterEach(async () => {
    await d.stop();
    await fake.stop();
    removeTempStates();
  });

  it('lists the folder\'s agents before a session, and hands the task to the one picked', async () => {
    expect(d.client.features?.namedAgents).toBe(true);
    fake.script(
      toolReply([{ id: 's1', name: 'run_subagent', args: { agent: 'reviewer', description: 'review', prompt: 'CHILD-REVIEW: look at app.py' } }]),
      textReply('SUMMARY-REVIEW: no bugs'),
      textReply('The reviewer found nothing.'),
    );
    let offered: any[] = [];
    pick.next = (items) => { offered = items; return items.find((i: any) => i.label === 'reviewer'); };
    input.next = () => 'check app.py';
    const sent: string[] = [];
    const h = host(sent);
    expect(await runAgent(h)).toBe('reviewer');

    expect(offered.map(({ label, description, detail }) => ({ label, description, detail }))).toEqual([
      { label: 'fixer', description: 'Fixes failing tests', detail: 'tools: edit (read, search and edit files) · model: deepseek-v4-pro' },
      { label: 'reviewer', description: 'Reviews a change for bugs', detail: "tools: explore (read and search only) · model: the session's" },
    ]);
    expect(input.asked[0].prompt).toBe('The task for reviewer (Reviews a change for bugs)');
    expect(sent).toEqual([delegationPrompt('reviewer', 'check app.py')]);
    expect(sent[0]).toBe(pythonPrompt('reviewer', 'check app.py')); // the daemon's words, to the byte

    const sid = h.session!;
    await d.waitFor(() => d.of(sid, 'turn/end').length === 1, 'the turn end', 60000);
    const users = fake.requests[0].body.messages.filter((m: any) => m.role === 'user');
    expect(users.at(-1).content).toBe(sent[0]);
    expect(d.of(sid, 'subagent/started').map((e: any) => e.data.agent)).toEqual(['reviewer']);
    expect(JSON.stringify(fake.requests[1].body.messages)).toContain('REVIEWER-INSTRUCTIONS: be strict.');

    // With the session, the list is the session's: the same agents.
    pick.next = (items) => { offered = items; return undefined; };
    expect(await runAgent(h)).toBeUndefined();
    expect(offered.map((i) => i.label)).toEqual(['fixer', 'reviewer']);
    expect(sent).toHaveLength(1); // dismissed: nothing sent
  });

  it('says when the folder has none, and sends nothing when the task is dismissed', async () => {
    const sent: string[] = [];
    const h = host(sent);
    const empty = join(d.root, 'empty');
    mkdirSync(empty);
    expect(await runAgent({ ...h, cwd: () => empty })).toBeUndefined();
    expect(infos).toContain('dsh: no named agents here: .dsh/agents/NAME.md defines one.');

    pick.next = (items) => items[0];
    input.next = () => undefined;
    expect(await runAgent(h)).toBeUndefined();
    expect(sent).toEqual([]);
    expect(fake.requests).toHaveLength(0);
  });
});
