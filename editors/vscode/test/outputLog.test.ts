// The output log's lines: one timestamp (the channel's), the daemon's level, secrets redacted, a
// save during a checkpoint restore said as one.
import { describe, expect, it } from 'vitest';
import { bodyBlock, daemonLine, redactSecrets, SaveReason, TurnFailureLog } from '../src/outputLog';
import type { AnyEvent } from '../src/protocol/types';

describe('output log', () => {
  it('drops the daemon\'s own timestamp and keeps its level', () => {
    expect(daemonLine('2026-12-05 09:16:00,123 WARNING dsh_daemon.host: an MCP server stopped'))
      .toEqual({ level: 'warn', text: 'daemon dsh_daemon.host: an MCP server stopped' });
    expect(daemonLine('2026-12-05 09:16:00,123 INFO dsh_daemon.x: ERROR is only a word here')).toEqual({ level: 'info', text: 'daemon dsh_daemon.x: ERROR is only a word here' });
    expect(daemonLine('2026-12-05 09:16:00,123 CRITICAL dsh_daemon: down').level).toBe('error');
    expect(daemonLine('Traceback (most recent call last):')).toEqual({ level: 'error', text: 'Traceback (most recent call last):' });
    expect(daemonLine('  File "x.py", line 1')).toEqual({ level: 'info', text: '  File "x.py", line 1' });
  });

  it('redacts keys and tokens a provider echoes', () => {
    expect(redactSecrets('key sk-abc123def456 and Bearer abcdefghijkl and api_key="zzzzzzzzzz"'))
      .toBe('key sk-…(redacted) and Bearer …(redacted) and api_key="…(redacted)"');
    expect(redactSecrets('HTTP 503: upstream busy')).toBe('HTTP 503: upstream busy');
  });

  it('a failed turn\'s block: its line, then the provider\'s body indented as an entry of its own (once)', () => {
    const log = new TurnFailureLog();
    const body = '<html>\n<h1>502 Bad Gateway</h1>\nkey=abcdefghijkl\n</html>';
    const end: AnyEvent = { sessionId: 'abcdef0123456789', seq: 9, type: 'turn/end',
      data: { turn: 3, reason: { kind: 'error', error: { code: 'SERVER', message: 'HTTP 502: Bad Gateway', status: 502, providerBody: body } } } } as AnyEvent;
    const lines = log.lines(end);
    expect(lines).toEqual([
      'turn 3 of session abcdef01 failed: SERVER: HTTP 502: Bad Gateway [status=502]; retries: none; the provider said: "HTTP 502: Bad Gateway"',
      'provider body:\n    <html>\n    <h1>502 Bad Gateway</h1>\n    key=…(redacted)\n    </html>',
    ]);
    expect(log.lines(end)).toEqual([]); // a replay logs nothing again
    expect(bodyBlock('{"error":"x"}')).toBe('provider body:\n    {"error":"x"}');
    const bare = { ...end, data: { turn: 4, reason: { kind: 'error', error: { code: 'TIMEOUT', message: 'no response' } } } } as AnyEvent;
    expect(log.lines(bare)).toHaveLength(1); // no body came: no block
  });

  it('a save while a checkpoint is restored is logged as a restore, and as an agent edit otherwise', async () => {
    const saves = new SaveReason();
    let during = '';
    await saves.during(async () => { during = saves.savedLine(['a.py']); });
    expect(during).toBe('saved after a checkpoint restore: a.py');
    expect(saves.savedLine(['a.py'])).toBe('saved after an agent edit: a.py');
    await expect(saves.during(async () => { throw new Error('x'); })).rejects.toThrow('x');
    expect(saves.savedLine([])).toBe('saved after an agent edit: nothing');
  });
});
