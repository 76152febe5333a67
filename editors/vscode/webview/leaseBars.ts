// The two bars that say who drives the session (protocol.md §3): in a window that follows it
// read-only, "Driven by another window" with Take over, then, once asked, that it waits for the other
// window's turn with Take over now (force); in the driving window, that another window asked to take
// the session over, with Hand over now. Rendered from the model's `lease` (src/protocol/lease.ts).
import type { ConnectionState, WebviewToHost } from '../src/protocol/panelMessages';
import type { SessionModel } from '../src/protocol/reducer';
import { button, el } from './dom';

export class LeaseBars {
  /** Under the transcript while the session is followed read-only. */
  readonly readOnlyBar = el('div', 'readonly-bar');
  /** In the driving window while another window waits to take the session over. */
  readonly handoverBar = el('div', 'handover-bar');
  private readonly text = el('span', 'readonly-text', 'Driven by another window');
  private readonly takeOverBtn: HTMLButtonElement;
  private readonly forceBtn: HTMLButtonElement;
  private readonly newBtn: HTMLButtonElement;
  private readonly handoverText = el('span', 'handover-text');
  private readonly actions = el('span', 'readonly-actions');
  private readonly handOverBtn: HTMLButtonElement;
  private shown = '';

  constructor(post: (m: WebviewToHost) => void) {
    this.readOnlyBar.setAttribute('role', 'status');
    this.handoverBar.setAttribute('role', 'status');
    this.takeOverBtn = button('Take over', () => post({ type: 'takeOver' }), 'primary small', 'Drive this session from this window (the other window lets go)');
    this.forceBtn = button('Take over now', () => post({ type: 'takeOver', force: true }), 'primary small',
      "End the other window's turn now and drive the session from here (what it has queued runs here)");
    this.newBtn = button('New session', () => post({ type: 'newSession' }), 'ghost small');
    // The buttons are one group that never breaks a label: in a narrow sidebar it moves below the line.
    this.readOnlyBar.append(this.text, this.actions);
    this.handOverBtn = button('Hand over now', () => post({ type: 'handOver' }), 'primary small',
      'End this turn now and let the other window drive the session (the queue goes with it)');
    const handActions = el('span', 'handover-actions');
    handActions.append(this.handOverBtn);
    this.handoverBar.append(this.handoverText, handActions);
  }

  render(model: SessionModel, connection: ConnectionState): void {
    const asked = model.readOnly ? model.lease?.asked : undefined;
    const handover = model.readOnly ? undefined : model.lease?.handover;
    const running = model.status === 'running';
    const key = `${model.readOnly}|${asked}|${handover?.force}|${running}|${connection.takeOver}|${connection.handOver}`;
    if (key === this.shown) return;
    this.shown = key;
    this.readOnlyBar.hidden = !model.readOnly;
    this.text.textContent = asked === 'forced' ? "Ending the other window's turn to take over…"
      : asked ? (running ? "Waiting for the other window's turn to finish…" : 'Taking over…')
        : 'Driven by another window';
    // Only the buttons that apply are in the bar (one line each, however narrow the sidebar).
    const offered = [
      ...(connection.takeOver && !asked ? [this.takeOverBtn] : []),
      ...(connection.takeOver && asked === 'waiting' ? [this.forceBtn] : []),
      ...(asked ? [] : [this.newBtn]),
    ];
    this.actions.replaceChildren(...offered);
    this.handoverBar.hidden = !handover;
    this.handoverText.textContent = handover?.force
      ? 'Another window is taking this session over: this turn is ending.'
      : 'Another window asked to take over this session.';
    this.handOverBtn.hidden = !!handover?.force || !connection.handOver;
  }
}
