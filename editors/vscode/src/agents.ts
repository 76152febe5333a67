// Named agents (protocol.md §12 "Subagents", flag `namedAgents`): "dsh: Run Agent…" lists the
// project's agents (`.dsh/agents/NAME.md`; `dsh/agents/list` of the session the chat shows, or
// before there is one of the workspace folder) in a quick pick with what each does, its tool set and
// model; the one picked gets a task (an input box), sent as the delegation prompt: an ordinary prompt
// in the chat's session that asks the model to run that agent (`run_subagent {agent: NAME}`). The
// words are the daemon's (dsh_daemon/model/named_agents.py), so every client asks the model alike.
import * as vscode from 'vscode';
import type { DshClient } from './protocol/client';

export interface NamedAgent { name: string; description: string; tools: string; model?: string }

/** Where the agents are read: a session (as its tools were wired), or a folder before there is one. */
export type AgentsWhere = { sessionId: string } | { cwd: string };

export function listAgents(client: DshClient, where: AgentsWhere): Promise<{ agents: NamedAgent[] }> {
  return client.rpc.request('dsh/agents/list', where);
}

/** The prompt that hands `task` to the named agent `name` (protocol.md §12 "Running one from a client"). */
export function delegationPrompt(name: string, task: string): string {
  return `Agent ${name}: ${task.trim()}\n\n(Hand this task to the named agent "${name}": call run_subagent with agent "${name}" and the task above as its prompt, then tell me what it reports.)`;
}

const TOOLSETS: Record<string, string> = {
  explore: 'read and search only',
  edit: 'read, search and edit files',
  all: 'every tool, commands too',
};

export interface AgentPick extends vscode.QuickPickItem { agent: NamedAgent }

/** A quick pick row: the name, what it does, then its tool set and model. */
export function agentItem(agent: NamedAgent): AgentPick {
  const tools = TOOLSETS[agent.tools] ? `${agent.tools} (${TOOLSETS[agent.tools]})` : agent.tools;
  return {
    label: agent.name,
    description: agent.description,
    detail: `tools: ${tools} · model: ${agent.model ?? "the session's"}`,
    agent,
  };
}

export interface AgentsHost {
  client(): Promise<DshClient>;
  /** The session the chat shows, if it has one. */
  sessionId(): string | null | undefined;
  /** The folder the agents are read from before there is a session. */
  cwd(): string | undefined;
  /** Sends a prompt in the chat's session (one is made first when there is none). */
  prompt(text: string): Promise<void>;
  focusChat(): Promise<void>;
}

/** "dsh: Run Agent…": pick an agent, give it a task, send it; the agent's name when one was sent. */
export async function runAgent(host: AgentsHost): Promise<string | undefined> {
  const client = await host.client();
  if (client.features && !client.features.namedAgents) {
    void vscode.window.showInformationMessage('dsh: this dsh-daemon cannot list named agents (no `namedAgents` capability).');
    return undefined;
  }
  const sessionId = host.sessionId();
  const cwd = host.cwd();
  const where: AgentsWhere | undefined = sessionId ? { sessionId } : cwd ? { cwd } : undefined;
  if (!where) { void vscode.window.showInformationMessage('dsh: open a folder to use its named agents.'); return undefined; }
  const { agents } = await listAgents(client, where);
  if (!agents.length) {
    void vscode.window.showInformationMessage('dsh: no named agents here: .dsh/agents/NAME.md defines one.');
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(agents.map(agentItem), {
    title: 'dsh: Run Agent', placeHolder: 'The agent to hand a task to', matchOnDescription: true, matchOnDetail: true,
  });
  if (!picked) return undefined;
  const task = await vscode.window.showInputBox({
    title: `dsh: the ${picked.agent.name} agent`, prompt: `The task for ${picked.agent.name} (${picked.agent.description})`,
    ignoreFocusOut: true, validateInput: (v) => v.trim() ? undefined : 'The agent needs a task',
  });
  if (!task?.trim()) return undefined;
  await host.prompt(delegationPrompt(picked.agent.name, task));
  await host.focusChat();
  return picked.agent.name;
}
