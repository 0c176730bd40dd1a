import type { ModelTool } from '../../adapters/outbound/ai/openai-chat.ts';
import { AppError } from '../../schema/errors.ts';
import type { AppDeps } from '../context.ts';
import type { ToolRunner } from '../knowledge-base/answer.ts';
import { providerUrls } from './oauth.ts';
import { ownerSchemaCheck, ownerSchemaRefusal, type SchemaCheck, toolkitSchemaCheck } from './schemas.ts';
import * as repo from './repository.ts';
import { credentialFor } from './tokens.ts';
import { findToolkit } from './toolkits/catalogue.ts';
import { isObject } from './toolkits/provider-kit.ts';
import { CredentialRefusedError, ToolError, type ToolDefinition, type Toolkit } from './toolkit.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';

/** One tool call may take this long, provider call included; the model is told it timed out. */
const TOOL_TIMEOUT_MS = 15_000;

/** A tool the model may call, and how it runs. Names follow the providers' rule: [a-zA-Z0-9_-]{1,64}. */
export interface RunnableTool {
  definition: ModelTool;
  /** Runs the call within `timeoutMs` (at most TOOL_TIMEOUT_MS). */
  run(args: unknown, timeoutMs: number): Promise<unknown>;
}

/**
 * The connected-account tools a knowledge base enabled, as model tools. Only ACTIVE accounts are offered; a
 * second account of the same toolkit gets a numbered name. Arguments are checked against the tool's JSON Schema
 * before anything is sent; the provider call uses the account's credential (refreshed if due) with a deadline.
 */
export async function connectedTools(
  deps: Pick<AppDeps, 'database' | 'secrets' | 'http' | 'config' | 'webhookJobs'>,
  ownerId: string,
  configId: string,
): Promise<RunnableTool[]> {
  const enabled = await repo.listEnabledTools(deps.database.db, ownerId, configId);
  const names = modelToolNames(enabled);
  const tools: RunnableTool[] = [];
  for (const [index, row] of enabled.entries()) {
    if (row.status !== 'ACTIVE') continue;
    const toolkit = findToolkit(row.toolkit);
    const tool = toolkit?.tools.find((t) => t.name === row.tool);
    if (!toolkit || !tool) continue;
    const account = await repo.findAccount(deps.database.db, ownerId, row.account_id);
    if (!account) continue;
    const settings = (account.settings as Record<string, unknown>) ?? {};
    const ownSchema = toolkit.slug === 'http' && isObject(settings.inputSchema);
    const schema = ownSchema ? (settings.inputSchema as Record<string, unknown>) : tool.inputSchema;
    // A schema stored before the keyword check was complete is never run: its patterns would run on the request thread.
    const refused = ownSchema ? ownerSchemaRefusal(schema) : null;
    const description = toolkit.slug === 'http' && typeof settings.description === 'string' ? settings.description : tool.description;
    tools.push({
      definition: {
        name: names[index]!,
        description: `${description} (${toolkit.name}${account.label ? `: ${account.label}` : ''})`,
        parameters: schema,
      },
      run: (args, timeoutMs) =>
        refused === null
          ? runConnectedTool(deps, toolkit, tool, account.id, () => (ownSchema ? ownerSchemaCheck(schema) : toolkitSchemaCheck(schema)), args, timeoutMs)
          : Promise.reject(new ToolError(refused)),
    });
  }
  return tools;
}

/**
 * The names models see for a knowledge base's enabled tools (rows in listEnabledTools' order): `<toolkit>__<tool>`,
 * numbered from the second account with the same tool. Given to every row, active or not, so that a name does not
 * move when another account stops or starts, and the enabled-tools list shows the names the model is offered.
 */
export function modelToolNames(rows: ReadonlyArray<{ config_id: string; toolkit: string; tool: string }>): string[] {
  const seen = new Map<string, number>();
  return rows.map((row) => {
    const base = `${row.toolkit}__${row.tool}`.slice(0, 60);
    const key = `${row.config_id} ${base}`;
    const count = (seen.get(key) ?? 0) + 1;
    seen.set(key, count);
    return count === 1 ? base : `${base}_${count}`;
  });
}

async function runConnectedTool(
  deps: Pick<AppDeps, 'database' | 'secrets' | 'http' | 'config' | 'webhookJobs'>,
  toolkit: Toolkit,
  tool: ToolDefinition,
  accountId: string,
  checkOf: () => SchemaCheck,
  args: unknown,
  timeoutMs: number,
) {
  const problem = checkOf()(args);
  if (problem !== null) throw new ToolError(`Invalid arguments: ${problem}`);
  const account = await repo.findAccountById(deps.database.db, accountId);
  if (!account) throw new ToolError('The connected account is gone');
  const credential = await credentialFor(deps, toolkit, account);
  await repo.touchAccount(deps.database.db, accountId);
  try {
    return await tool.run(args as Record<string, unknown>, {
      http: deps.http,
      credential,
      apiBaseUrl: providerUrls(deps.config, toolkit).apiBaseUrl,
      settings: (account.settings as Record<string, unknown>) ?? {},
      timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    // The provider no longer accepts the credential: the account stops being offered until it is reconnected.
    if (error instanceof CredentialRefusedError) await markRevoked(deps, account, error.message);
    throw error;
  }
}

async function markRevoked(deps: Pick<AppDeps, 'database' | 'webhookJobs'>, account: repo.AccountRow, reason: string) {
  await withEvents(
    deps,
    (trx) => repo.updateAccount(trx, account.id, { status: 'REVOKED', status_reason: reason, last_error: reason }),
    (row) => (row ? [webhookEvent(row.owner_id, 'toolhub_account.expired', { id: row.id, toolkit: row.toolkit, status: 'REVOKED' as const, reason })] : []),
  );
}

/** The runner the answer loop uses: a failing tool becomes an error the model reads, never an exception. */
export function toolRunner(tools: RunnableTool[]): ToolRunner {
  const byName = new Map(tools.map((t) => [t.definition.name, t]));
  return {
    definitions: tools.map((t) => t.definition),
    async run(name, args, timeoutMs) {
      const tool = byName.get(name);
      if (!tool) return { ok: false, error: `There is no tool named ${name.slice(0, 64)}` };
      const limit = Math.max(1, Math.min(TOOL_TIMEOUT_MS, timeoutMs));
      let timer: NodeJS.Timeout | undefined;
      try {
        const result = await Promise.race([
          tool.run(args, limit),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new ToolError(`The tool did not answer within ${seconds(limit)}`)), limit);
          }),
        ]);
        return { ok: true, result };
      } catch (error) {
        if (error instanceof ToolError || error instanceof AppError)
          return { ok: false, error: error instanceof AppError && error.details ? error.details : error.message };
        return { ok: false, error: 'The tool failed' };
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** "15 s", "1.5 s": a limit as the model and the owner read it. */
function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}
