import { type AnyRouter, getTRPCErrorFromUnknown, TRPCError } from '@trpc/server';

/** What tRPC's middlewares answer (its internal middleware result). */
interface LayerResult {
  ok: boolean;
  data?: unknown;
  error?: unknown;
  marker: string;
}

interface NextOptions {
  ctx?: object;
  input?: unknown;
  getRawInput?: () => Promise<unknown>;
}

/** The options tRPC gives each layer of a procedure: its middlewares, then the input and output validators, then the resolver. */
interface LayerOptions {
  ctx: object;
  type: string;
  path: string;
  input: unknown;
  getRawInput: () => Promise<unknown>;
  meta: unknown;
  signal: AbortSignal | undefined;
  batchIndex: number;
  next(options?: NextOptions): Promise<LayerResult>;
}

interface ProcedureDefinition {
  _def: { type: string; meta?: unknown; middlewares: Array<(options: LayerOptions) => Promise<LayerResult>> };
}

export type ProcedureRunner = (ctx: object, rawInput: unknown) => Promise<unknown>;

/**
 * The procedure at `path` of `router`, as a function of the context and the raw input: what `router.createCaller(ctx)`
 * and a call at that path do, every layer of the procedure run in order with the same options and the same merging
 * of what a middleware adds to the context, and a failure thrown as the same TRPCError (a chain that never calls
 * `next()` is a 500 either way, with our message). The difference is only the building of each layer's options:
 * tRPC's loop copies them with a transpiled spread helper twice per layer and the whole context once more (14% of an
 * authenticated REST request's CPU in `bench:http`'s profile), where this builds one object literal per layer.
 * Built once per route; the REST adapter's tests run every procedure through it, so a change in tRPC's middleware
 * contract shows there.
 */
export function procedureRunner(router: AnyRouter, path: string): ProcedureRunner {
  const procedure = (router._def.procedures as Record<string, ProcedureDefinition | undefined>)[path];
  if (!procedure) throw new Error(`no procedure at ${path}`);
  const { middlewares, meta, type } = procedure._def;

  const run = async (index: number, ctx: object, input: unknown, getRawInput: () => Promise<unknown>): Promise<LayerResult> => {
    try {
      return await middlewares[index]!({
        ctx,
        type,
        path,
        input,
        getRawInput,
        meta,
        signal: undefined,
        batchIndex: 0,
        next: (options) =>
          run(
            index + 1,
            options?.ctx ? { ...ctx, ...options.ctx } : ctx,
            options && 'input' in options ? options.input : input,
            options?.getRawInput ?? getRawInput,
          ),
      });
    } catch (cause) {
      return { ok: false, error: getTRPCErrorFromUnknown(cause), marker: 'middlewareMarker' };
    }
  };

  return async (ctx, rawInput) => {
    const result = await run(0, ctx, undefined, async () => rawInput);
    if (!result) throw new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: `${path}: no result from its middlewares` });
    if (!result.ok) throw result.error;
    return result.data;
  };
}
