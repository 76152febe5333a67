// Adapts a vscode-jsonrpc MessageConnection to the Rpc seam of DshClient.
import type { MessageConnection } from 'vscode-jsonrpc';
import type { Rpc } from './client';

export function rpcFromConnection(conn: MessageConnection): Rpc {
  return {
    request: (method, params) => conn.sendRequest(method, params),
    notify: (method, params) => conn.sendNotification(method, params),
    onNotification: (method, handler) => conn.onNotification(method, handler),
    onRequest: (method, handler) => conn.onRequest(method, handler),
  };
}
