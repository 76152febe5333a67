// A subagent as a nested, collapsible card under its parent's `run_subagent` tool card (protocol.md
// §12 "Subagents"): its description and state, its steps and tool calls as they happen, its latest
// words while it runs and its summary when it ends. Open while it runs, closed once it ended (what
// the person chose stays: the card is rebuilt on every change of its tool item).
import { toolErrorWords } from './toolWords';
import type { ToolItem } from '../src/protocol/reducer';
import { subagentFromCall, subagentStatusText, type SubagentState } from '../src/protocol/subagents';
import { el } from './dom';

/** What the person opened or closed, per `run_subagent` call. */
const chosen = new Map<string, boolean>();
const SUMMARY_CHARS = 4000;

export function subagentCard(it: ToolItem): HTMLElement {
  const s: SubagentState = it.subagent ?? subagentFromCall(it.args, it.status, it.result, it.error, it.meta);
  const card = el('details', `subagent ${s.status}`) as HTMLDetailsElement;
  card.dataset.callId = it.callId;
  card.open = chosen.get(it.callId) ?? s.status === 'running';
  card.addEventListener('toggle', () => { chosen.set(it.callId, card.open); });
  const sum = el('summary', 'subagent-head');
  sum.append(el('span', 'subagent-mark', '↳'), el('span', 'subagent-desc', s.description || 'subagent'),
    el('span', `subagent-state ${s.status}`, subagentStatusText(s)));
  const facts = [s.agent ? `agent ${s.agent}` : '', s.tools ?? '', s.steps ? `step ${s.steps}${s.maxSteps ? `/${s.maxSteps}` : ''}` : '',
    s.calls.length + s.earlier ? `${s.calls.length + s.earlier} tool call${s.calls.length + s.earlier === 1 ? '' : 's'}` : ''].filter(Boolean);
  if (facts.length) sum.append(el('span', 'subagent-facts', facts.join(' · ')));
  sum.title = s.childId ? `Subagent session ${s.childId}` : 'Subagent';
  card.append(sum);
  const body = el('div', 'subagent-body');
  if (s.earlier) body.append(el('div', 'subagent-earlier', `… ${s.earlier} earlier tool call${s.earlier === 1 ? '' : 's'}`));
  if (s.calls.length) {
    const ul = el('ul', 'subagent-calls');
    ul.setAttribute('aria-label', 'the subagent\'s tool calls');
    for (const c of s.calls) {
      const li = el('li', `subagent-call ${c.status}`);
      li.append(el('span', 'subagent-call-mark', CALL_MARK[c.status]), el('span', 'subagent-call-name', c.name),
        el('span', 'subagent-call-args', c.summary));
      if (c.status === 'awaiting-permission') li.append(el('span', 'subagent-call-note', 'waits for your answer'));
      else if (c.error) li.append(el('span', 'subagent-call-note', toolErrorWords(c.error)));
      ul.append(li);
    }
    body.append(ul);
  } else if (!it.subagent && s.status !== 'running') {
    body.append(el('div', 'subagent-quiet', 'Its steps are in its own session.'));
  }
  if (s.status === 'running' && s.text) body.append(el('div', 'subagent-text', s.text));
  if (s.summary !== undefined) {
    const summary = el('div', 'subagent-summary');
    summary.append(el('div', 'subagent-summary-label', s.status === 'completed' ? 'Summary' : 'What it gave back'),
      el('div', 'subagent-summary-text', s.summary.length > SUMMARY_CHARS ? s.summary.slice(0, SUMMARY_CHARS) + '\n…' : s.summary));
    body.append(summary);
  }
  card.append(body);
  return card;
}

const CALL_MARK: Record<string, string> = { running: '…', 'awaiting-permission': '?', ok: '✓', error: '✗' };
