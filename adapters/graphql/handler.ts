import { createYoga } from 'graphql-yoga';
import type { AnyRouter } from '@trpc/server';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context } from '../../routers/context.ts';
import { buildGraphqlSchema } from './schema.ts';

export function createGraphqlHandler(router: AnyRouter, maxBodyBytes: number) {
  const yoga = createYoga<{ ctx: Context }, Context>({
    schema: buildGraphqlSchema(router) as never,
    graphqlEndpoint: '/graphql',
    maxRequestBodySize: maxBodyBytes,
    context: ({ ctx }) => ctx,
    // Our resolvers already turn errors into safe GraphQLErrors; anything else is masked by Yoga.
    maskedErrors: true,
    landingPage: false,
    graphiql: false,
    logging: false,
    plugins: [
      {
        onResponse({ response, serverContext }) {
          const headers = (serverContext as { ctx?: Context } | undefined)?.ctx?.responseHeaders ?? {};
          for (const [name, value] of Object.entries(headers)) response.headers.set(name, value);
        },
      },
    ],
  });
  return async (req: IncomingMessage, res: ServerResponse, ctx: Context) => {
    // handle(req, res) runs the request and writes the response to `res`; handleNodeRequestAndResponse
    // only returns a fetch Response and would leave the socket hanging.
    await yoga.handle(req, res, { ctx });
  };
}
