// The host's side of edit-and-resend, /undo and /fork: which prompts start a turn, the last turn that
// ended, and the files a rewind to before a turn restores (the earliest turn decides how).
import { describe, expect, it } from 'vitest';
import { lastEndedTurn, promptTurns, restoredFiles } from '../src/composerActions';
import { emptyModel, reduceAll } from '../src/protocol/reducer';
import { ev, S, turnActions, user } from './browserPage';

describe('composer actions', () => {
  it('prompts that started a turn (not a steer), the last ended turn', () => {
    const m = reduceAll(emptyModel(S), [
      ...turnActions(1, 0, 'one', 'first prompt'),
      ev('turn/start', { turn: 2 }, 5),
      ev('user/message', user('u2', 'second prompt'), 6),
    ]);
    expect(promptTurns(m)).toEqual([{ turn: 1, text: 'first prompt' }, { turn: 2, text: 'second prompt' }]);
    expect(lastEndedTurn(m)).toBe(1); // turn 2 still runs
    expect(lastEndedTurn(emptyModel(S))).toBeUndefined();
  });

  it('restored files: from the turn on, once each; created then means deleted; a dropped checkpoint is said', () => {
    const turns = [
      { turn: 1, files: [{ path: '/w/old.txt', created: false }] },
      { turn: 2, files: [{ path: '/w/notes.txt', created: true }, { path: '/w/app.py', created: false }] },
      { turn: 3, files: [{ path: '/w/notes.txt', created: false }, { path: '/w/big.bin', created: false, dropped: true }] },
    ];
    const rel = (p: string) => p.replace('/w/', '');
    expect(restoredFiles(turns, 2, rel)).toEqual(['notes.txt (deleted: the agent created it)', 'app.py', 'big.bin (cannot be restored)']);
    expect(restoredFiles(turns, 4, rel)).toEqual([]);
  });
});
