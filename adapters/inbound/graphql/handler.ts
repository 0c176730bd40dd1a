import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { createGraphQLError, createYoga, type Plugin } from 'graphql-yoga';
import type { GraphQLError, ValidationContext } from 'graphql';
import type { AnyRouter } from '@trpc/server';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { Context } from '../../../routers/context.ts';
import { AppError, ERROR_CODES, type ErrorCode } from '../../../schema/errors.ts';
import { HTTP_STATUS } from '../http-status.ts';
import { readBodyBytes } from '../request-body.ts';
import { buildGraphqlSchema } from './schema.ts';
import { createParseCache } from './parse-cache.ts';
import { GRAPHIQL_SECURITY_HEADERS, renderGraphiqlPage } from './graphiql.ts';

/**
 * Limits on the shape of a GraphQL document. The dashboard's own queries reach depth 3, use no aliases and
 * fewer than 100 tokens; these leave room for hand-written queries while keeping every document small
 * enough that parsing, validation and execution stay cheap and shallow (graphql-js parses recursively: the
 * token limit, counted while parsing, stops a deeply nested document long before the stack could run out).
 */
export const GRAPHQL_LIMITS = {
  maxTokens: 1000,
  maxDepth: 6,
  maxAliases: 15,
  maxDirectives: 50,
  maxCost: 5000,
} as const;

const LIMIT_DETAILS =
  `Limits: ${GRAPHQL_LIMITS.maxTokens} tokens, depth ${GRAPHQL_LIMITS.maxDepth}, ` +
  `${GRAPHQL_LIMITS.maxAliases} aliases, ${GRAPHQL_LIMITS.maxDirectives} directives, cost ${GRAPHQL_LIMITS.maxCost}`;

/** A refused document is the client's mistake: 400 under every Accept type, including legacy application/json
 *  (where Yoga answers 200 to errors it marks as coming from the GraphQL-over-HTTP spec). */
const limitExtensions = () => ({ code: 'BAD_REQUEST', details: LIMIT_DETAILS, http: { status: HTTP_STATUS.BAD_REQUEST, spec: false } });

function rejectOverLimit(ctx: ValidationContext | null, error: GraphQLError): void {
  // Armor prefixes every refusal with "Syntax Error: ", which is wrong for depth, aliases and cost.
  const refused = createGraphQLError(error.message.replace(/^Syntax Error: /, ''), { extensions: limitExtensions() });
  // Validation rules can report and let validation finish; the token counter runs inside the parser, which
  // has no context to report to, so it has to stop parsing by throwing.
  if (ctx) ctx.reportError(refused);
  else throw refused;
}

const onLimit = { onReject: [rejectOverLimit], propagateOnRejection: false };

/** Yoga marks every parse failure as a spec error (200 under legacy application/json); a token-limit refusal
 *  is a parse failure too, so its own status is restored once the result is final, just before the response. */
const keepLimitStatus: Plugin = {
  onResultProcess({ result }) {
    for (const one of Array.isArray(result) ? result : [result]) {
      for (const error of (one as { errors?: readonly GraphQLError[] }).errors ?? []) {
        const http = error.extensions?.http as { spec?: boolean } | undefined;
        if (error.extensions?.details === LIMIT_DETAILS && http) http.spec = false;
      }
    }
  },
};

/** Yoga's and graphql-js's own error codes, as the closed list names the same errors. */
const YOGA_CODES: Record<string, ErrorCode> = {
  GRAPHQL_PARSE_FAILED: 'BAD_REQUEST',
  GRAPHQL_VALIDATION_FAILED: 'VALIDATION_FAILED',
  BAD_USER_INPUT: 'VALIDATION_FAILED',
  REQUEST_ENTITY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  INTERNAL_SERVER_ERROR: 'INTERNAL_ERROR',
};
const isErrorCode = (code: unknown): code is ErrorCode => typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code);

/** The code an error reaches the client with: ours as it is, another by its name or, failing that, by its HTTP status. */
function closedListCode(code: unknown, status: number | undefined): ErrorCode {
  // Yoga also uses BAD_REQUEST, ours by name, for a 405 (a mutation over GET, PUT /graphql): the status decides then.
  if (isErrorCode(code) && (status === undefined || HTTP_STATUS[code] === status)) return code;
  const named = typeof code === 'string' ? YOGA_CODES[code] : undefined;
  if (named) return named;
  const byStatus = ERROR_CODES.find((candidate) => HTTP_STATUS[candidate] === status && candidate !== 'VALIDATION_FAILED' && candidate !== 'MALFORMED_JSON');
  // Without a status it is graphql-js's own error about the document or its variables: the client's.
  return byStatus ?? (status !== undefined && status >= 500 ? 'INTERNAL_ERROR' : 'BAD_REQUEST');
}

/**
 * Every error a client sees carries a code of the closed list (schema/errors.ts), as REST's and tRPC's do: Yoga's own
 * (a parse or validation failure, an oversized body, a masked crash) are renamed. Their HTTP status is Yoga's, which
 * follows GraphQL over HTTP and equals the mapper's for the same code where both define one.
 */
const closedListCodes: Plugin = {
  onResultProcess({ result }) {
    for (const one of Array.isArray(result) ? result : [result]) {
      for (const error of (one as { errors?: readonly GraphQLError[] }).errors ?? []) {
        const extensions = error.extensions as Record<string, unknown> | undefined;
        if (!extensions) continue;
        extensions.code = closedListCode(extensions.code, (extensions.http as { status?: number } | undefined)?.status);
      }
    }
  },
};

/** What the handler hands Yoga besides the request: our context, and a body the reader refused. */
interface ServerContext {
  ctx: Context;
  refusedBody?: AppError;
}

/**
 * A body the reader refused (over the cap or the body budget, cut off, stalled) is answered before Yoga parses
 * anything, as a GraphQL error with the refusal's own code, status and headers (Retry-After).
 */
const refusedBodies: Plugin<Record<string, unknown>, ServerContext> = {
  onRequestParse({ serverContext }) {
    const refusal = serverContext.refusedBody;
    if (!refusal) return;
    throw createGraphQLError(refusal.message, {
      extensions: { code: refusal.code, details: refusal.details, http: { status: HTTP_STATUS[refusal.code], headers: refusal.headers } },
    });
  },
};

export function createGraphqlHandler(router: AnyRouter, maxBodyBytes: number) {
  const yoga = createYoga<ServerContext, Context>({
    schema: buildGraphqlSchema(router) as never,
    graphqlEndpoint: '/graphql',
    maxRequestBodySize: maxBodyBytes,
    parserAndValidationCache: { documentCache: createParseCache(), errorCache: createParseCache() },
    context: ({ ctx }) => ctx,
    // Our resolvers already turn errors into safe GraphQLErrors; anything else is masked by Yoga.
    maskedErrors: true,
    landingPage: false,
    // A GET that accepts text/html (a browser) gets the explorer; API clients never ask for HTML.
    graphiql: true,
    renderGraphiQL: renderGraphiqlPage,
    logging: false,
    plugins: [
      refusedBodies,
      EnvelopArmorPlugin({
        maxTokens: { n: GRAPHQL_LIMITS.maxTokens, ...onLimit },
        // Fragments do not add depth: the same selection written with or without them is equally deep.
        maxDepth: { n: GRAPHQL_LIMITS.maxDepth, flattenFragments: true, ...onLimit },
        // Aliasing __typename is counted too: thousands of aliases of anything are refused.
        maxAliases: { n: GRAPHQL_LIMITS.maxAliases, allowList: [], ...onLimit },
        maxDirectives: { n: GRAPHQL_LIMITS.maxDirectives, ...onLimit },
        costLimit: { maxCost: GRAPHQL_LIMITS.maxCost, ...onLimit },
      }),
      keepLimitStatus,
      closedListCodes,
      {
        onResponse({ response, serverContext }) {
          const headers = (serverContext as { ctx?: Context } | undefined)?.ctx?.responseHeaders ?? {};
          for (const [name, value] of Object.entries(headers)) response.headers.set(name, value);
          if (response.headers.get('content-type')?.startsWith('text/html')) {
            for (const [name, value] of Object.entries(GRAPHIQL_SECURITY_HEADERS)) response.headers.set(name, value);
            response.headers.set('Content-Type', 'text/html; charset=utf-8');
          }
        },
      },
    ],
  });
  return async (req: IncomingMessage, res: ServerResponse, ctx: Context) => {
    // Yoga would buffer the body itself, outside the body budget: it is read here, under the same cap and budget as
    // REST's, and handed over as the request's body (which Yoga's Node adapter reads instead of the socket).
    let refusedBody: AppError | undefined;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      try {
        const body = await readBodyBytes(req, maxBodyBytes);
        // As a stream of one chunk, not the Buffer itself: the adapter first tests a given body with Object.keys,
        // which on a Buffer makes a string per byte (a 1 MB body cost 0.4 s of the request thread, anonymously).
        if (body.length > 0) (req as IncomingMessage & { body?: Readable }).body = Readable.from([body]);
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        refusedBody = error;
      }
    }
    // handle(req, res) runs the request and writes the response to `res`; handleNodeRequestAndResponse
    // only returns a fetch Response and would leave the socket hanging.
    await yoga.handle(req, res, { ctx, refusedBody });
  };
}
