// Messages between the extension host and the chat webview (both directions). No vscode import.
import type { Action, SessionModel } from './reducer';
import type { PermissionOutcome, Range, Target } from './types';

export interface Chip { kind: 'selection' | 'file'; uri: string; range?: Range; label: string }

export type HostToWebview =
  | { type: 'snapshot'; model: SessionModel; connection: ConnectionState }
  | { type: 'actions'; actions: Action[] }
  | { type: 'connection'; connection: ConnectionState }
  | { type: 'chip'; chip: Chip }
  | { type: 'focusComposer' };

export interface ConnectionState { state: 'starting' | 'ready' | 'stopped' | 'error'; message?: string; hasKey?: boolean }

export type WebviewToHost =
  | { type: 'ready' }
  | { type: 'send'; text: string; chips: Chip[]; mode: 'followup' | 'steer' }
  | { type: 'cancel'; keepInbox: boolean }
  | { type: 'wake' }
  | { type: 'continue' }
  | { type: 'loadOlder' }
  | { type: 'newSession' }
  | { type: 'switchSession' }
  | { type: 'setApiKey' }
  | { type: 'addSelection' }
  | { type: 'addFile' }
  | { type: 'inboxRemove'; messageId: string }
  | { type: 'inboxReplace'; messageId: string; text: string }
  | { type: 'inboxMove'; messageId: string; target: Target; index?: number }
  | { type: 'permission'; callId: string; outcome: PermissionOutcome }
  | { type: 'viewDiff'; callId: string }
  | { type: 'openFile'; uri: string; range?: Range }
  | { type: 'copy'; text: string }
  | { type: 'insert'; text: string };
