// `/cost` in words: the session's tokens and cost as the daemon sums them over all its turns
// (`dsh/session/usage`, protocol.md §3), or, from a daemon without that method, over the turns the
// panel holds (a long session's older pages are then left out). No vscode import: the tests and the
// webview may use it.
import type { SessionModel } from './protocol/reducer';
import type { SessionUsage } from './protocol/types';

const n = (x: number) => x.toLocaleString('en-US');

/** The sum of the `turn/usage` of the turns the panel holds, in the daemon's answer's shape. */
export function heldUsage(model: SessionModel): SessionUsage {
  const turns = Object.values(model.turnUsage);
  let input = 0, output = 0, cached = 0, cost = 0, priced = 0;
  for (const u of turns) {
    input += u.inputTokens; output += u.outputTokens; cached += u.cacheReadTokens ?? 0;
    if (typeof u.costUsd === 'number') { cost += u.costUsd; priced++; }
  }
  return { turns: turns.length, usage: { inputTokens: input, outputTokens: output, cacheReadTokens: cached }, costUsd: priced ? cost : null, unpricedTurns: turns.length - priced };
}

const dollars = (cost: number) => `$${cost >= 1 ? cost.toFixed(2) : cost.toPrecision(2)}`;

/** The line `/cost` says under the composer: the session's own turns, then its subagents' when it
 *  has started any (the daemon sums them apart: `subagents`). */
export function costWords(u: SessionUsage): string {
  const sub = u.subagents;
  const subWords = sub
    ? ` Subagents: ${sub.costUsd !== null ? dollars(sub.costUsd) : 'cost not known'} · ${n(sub.usage.inputTokens)} input, ${n(sub.usage.outputTokens)} output, over ${sub.turns} turn${sub.turns === 1 ? '' : 's'} in ${sub.sessions} session${sub.sessions === 1 ? '' : 's'}.`
    : '';
  if (!u.turns) return `Cost: nothing yet (no turn has reported its usage).${subWords}`;
  const cost = u.costUsd;
  const money = cost !== null
    ? `${dollars(cost)}${u.unpricedTurns ? ' (some turns without prices)' : ''}`
    : 'no prices configured for the model';
  const { inputTokens, outputTokens, cacheReadTokens } = u.usage;
  return `Cost: ${money} · ${n(inputTokens)} input tokens (${n(cacheReadTokens ?? 0)} cached), ${n(outputTokens)} output, over ${u.turns} turn${u.turns === 1 ? '' : 's'}.${subWords}`;
}
