// What the panel is told about the daemon process (no vscode import: the panel's tests use it).

export interface DaemonState {
  state: 'starting' | 'ready' | 'stopped' | 'error';
  /** One sentence for a person. */
  message?: string;
  detail?: string;
  kind?: 'notFound' | 'startFailed';
  /** Settings changed that the running daemon takes only at a restart: offered until answered. */
  restartOffer?: boolean;
}

/** The daemon could not be started; `state` says why, for a person. */
export class DaemonUnavailable extends Error {
  constructor(readonly state: DaemonState) { super(state.message); }
}
