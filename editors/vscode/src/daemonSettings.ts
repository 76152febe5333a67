// What the extension tells the daemon of its settings (no `vscode` import: tested on its own). The
// same object goes at start (initializationOptions, plus the API key) and with every change
// (workspace/didChangeConfiguration): the daemon merges a change over the options given at start, not
// over the previous change, so each change must carry every setting the extension owns — a provider
// change alone would otherwise put the sandbox back to the mode of the start.
import type { SandboxMode } from './protocol/types';

export const SANDBOX_MODES: readonly SandboxMode[] = ['read-only', 'workspace-write', 'full-access'];

export function isSandboxMode(v: unknown): v is SandboxMode {
  return typeof v === 'string' && (SANDBOX_MODES as readonly string[]).includes(v);
}

/** The provider keys flat (as they always were: flat keys keep the API key given at start) and
 *  `tools.sandbox.mode` when `dsh.sandbox.mode` names a mode ("" or unset: config.json decides). */
export function daemonSettings(provider: Record<string, unknown>, sandboxMode: unknown): Record<string, unknown> {
  const settings: Record<string, unknown> = { ...provider };
  if (isSandboxMode(sandboxMode)) settings.tools = { sandbox: { mode: sandboxMode } };
  return settings;
}
