import SchemaBuilder from '@pothos/core';
import { createGraphQLError } from 'graphql-yoga';
import type { AnyRouter } from '@trpc/server';
import type { Context } from '../../../routers/context.ts';
import type { AppRouter } from '../../../routers/app-router.ts';
import { toClientError } from '../client-error.ts';
import { addReportingFields } from './reporting.ts';

type Caller = ReturnType<AppRouter['createCaller']>;
type Owner = Awaited<ReturnType<Caller['auth']['me']>>['owner'];
type ChatInterface = Awaited<ReturnType<Caller['chatInterfaces']['list']>>['chatInterfaces'][number];
type ApiKey = Awaited<ReturnType<Caller['apiKeys']['list']>>['apiKeys'][number];
type KnowledgeBase = Awaited<ReturnType<Caller['knowledgeBase']['configs']['list']>>['configs'][number];
type KbDocument = Awaited<ReturnType<Caller['knowledgeBase']['documents']['list']>>['documents'][number];
type Webhook = Awaited<ReturnType<Caller['webhooks']['list']>>['webhooks'][number];
type WebhookDelivery = Awaited<ReturnType<Caller['webhooks']['deliveries']>>['deliveries'][number];
type Subscription = Awaited<ReturnType<Caller['billing']['subscription']>>['subscription'];
type KbCollection = Awaited<ReturnType<Caller['knowledgeBase']['ask']['collections']>>['collections'][number];

/**
 * GraphQL for dashboards and reporting tools. Every resolver calls the same tRPC procedure the REST
 * surface calls (through a caller bound to the request context): auth, rate limits and validation
 * happen once, in the procedure.
 */
export function buildGraphqlSchema(router: AnyRouter) {
  const createCaller = (router as unknown as AppRouter).createCaller;
  const builder = new SchemaBuilder<{ Context: Context; Scalars: { DateTime: { Input: string; Output: string } } }>({});

  async function call<T>(ctx: Context, run: (caller: Caller) => Promise<T>): Promise<T> {
    try {
      return await run(createCaller(ctx));
    } catch (error) {
      const { appError, unexpected } = toClientError(error);
      if (unexpected)
        ctx.deps.errorReporter.capture(error instanceof Error && error.cause ? error.cause : error, { requestId: ctx.requestId, path: '/graphql' });
      // Built with Yoga's own graphql instance: if this module and Yoga load different copies of `graphql`
      // (ESM vs CJS, as under vitest), `instanceof GraphQLError` fails and Yoga masks the error as INTERNAL_SERVER_ERROR.
      throw createGraphQLError(appError.message, { extensions: { code: appError.code, details: appError.details } });
    }
  }

  builder.scalarType('DateTime', {
    description: 'ISO 8601 timestamp',
    serialize: (value) => String(value),
    parseValue: (value) => String(value),
  });

  const UsageRef = builder.objectRef<Subscription['usage']>('Usage').implement({
    description: "This calendar month's (UTC) usage, and what is stored now",
    fields: (t) => ({
      periodStart: t.field({ type: 'DateTime', resolve: (u) => u.periodStart }),
      periodEnd: t.field({ type: 'DateTime', resolve: (u) => u.periodEnd }),
      messages: t.exposeInt('messages'),
      queries: t.exposeInt('queries'),
      tokensIn: t.exposeFloat('tokensIn'),
      tokensOut: t.exposeFloat('tokensOut'),
      documents: t.exposeInt('documents'),
      storageBytes: t.exposeFloat('storageBytes'),
    }),
  });

  const SubscriptionRef = builder.objectRef<Subscription>('Subscription').implement({
    fields: (t) => ({
      plan: t.exposeString('plan'),
      status: t.exposeString('status'),
      source: t.exposeString('source'),
      interval: t.exposeString('interval', { nullable: true }),
      currentPeriodEnd: t.field({ type: 'DateTime', resolve: (s) => s.currentPeriodEnd }),
      cancelAtPeriodEnd: t.exposeBoolean('cancelAtPeriodEnd'),
      trialEnd: t.field({ type: 'DateTime', nullable: true, resolve: (s) => s.trialEnd }),
      uploadLimitBytes: t.int({ resolve: (s) => s.limits.uploadBytes }),
      enterpriseWebhooks: t.boolean({ resolve: (s) => s.limits.enterpriseWebhooks }),
      usage: t.field({ type: UsageRef, resolve: (s) => s.usage }),
    }),
  });

  const OwnerRef = builder.objectRef<Owner>('Owner').implement({
    fields: (t) => ({
      id: t.exposeID('id'),
      email: t.exposeString('email'),
      name: t.exposeString('name', { nullable: true }),
      plan: t.exposeString('plan'),
      role: t.exposeString('role'),
      tourCompletedAt: t.field({ type: 'DateTime', nullable: true, resolve: (o) => o.tourCompletedAt }),
      createdAt: t.field({ type: 'DateTime', resolve: (o) => o.createdAt }),
      subscription: t.field({
        type: SubscriptionRef,
        description: 'The plan, its state and limits, and this month’s usage (as GET /api/v1/user/subscription)',
        resolve: async (_o, _args, ctx) => (await call(ctx, (c) => c.billing.subscription())).subscription,
      }),
    }),
  });

  const ChatInterfaceRef = builder.objectRef<ChatInterface>('ChatInterface').implement({
    fields: (t) => ({
      id: t.exposeID('id'),
      name: t.exposeString('name'),
      slug: t.exposeString('slug'),
      configId: t.exposeString('configId', { nullable: true }),
      endpointUrl: t.exposeString('endpointUrl', { nullable: true }),
      endpointType: t.exposeString('endpointType', { nullable: true }),
      hasApiKey: t.exposeBoolean('hasApiKey'),
      welcomeMessage: t.exposeString('welcomeMessage', { nullable: true }),
      placeholder: t.exposeString('placeholder', { nullable: true }),
      primaryColor: t.exposeString('primaryColor', { nullable: true }),
      avatarUrl: t.exposeString('avatarUrl', { nullable: true }),
      public: t.exposeBoolean('public'),
      allowedOrigins: t.exposeStringList('allowedOrigins'),
      createdAt: t.field({ type: 'DateTime', resolve: (c) => c.createdAt }),
      updatedAt: t.field({ type: 'DateTime', resolve: (c) => c.updatedAt }),
      apiKeys: t.field({
        type: [ApiKeyRef],
        description: 'The API keys bound to this interface',
        resolve: async (c, _args, ctx) => (await call(ctx, (caller) => caller.apiKeys.list())).apiKeys.filter((k) => k.chatInterfaceId === c.id),
      }),
    }),
  });

  const ApiKeyRef = builder.objectRef<ApiKey>('ApiKey').implement({
    fields: (t) => ({
      id: t.exposeID('id'),
      name: t.exposeString('name'),
      chatInterfaceId: t.exposeID('chatInterfaceId'),
      prefix: t.exposeString('prefix'),
      active: t.exposeBoolean('active'),
      lastUsedAt: t.field({ type: 'DateTime', nullable: true, resolve: (k) => k.lastUsedAt }),
      createdAt: t.field({ type: 'DateTime', resolve: (k) => k.createdAt }),
    }),
  });

  const KbDocumentRef = builder.objectRef<KbDocument>('KnowledgeBaseDocument').implement({
    fields: (t) => ({
      id: t.exposeID('id'),
      configId: t.exposeID('configId'),
      fileName: t.exposeString('fileName'),
      kind: t.exposeString('kind'),
      sizeBytes: t.exposeInt('sizeBytes'),
      status: t.exposeString('status', { description: 'processing, completed or failed' }),
      stage: t.exposeString('stage'),
      error: t.exposeString('error', { nullable: true }),
      pageCount: t.exposeInt('pageCount', { nullable: true }),
      chunkCount: t.exposeInt('chunkCount'),
      createdAt: t.field({ type: 'DateTime', resolve: (d) => d.createdAt }),
      updatedAt: t.field({ type: 'DateTime', resolve: (d) => d.updatedAt }),
    }),
  });

  const KbCollectionRef = builder.objectRef<KbCollection>('VectorCollection').implement({
    fields: (t) => ({
      name: t.exposeString('name'),
      configId: t.exposeID('configId'),
      vectorCount: t.exposeInt('vectorCount'),
      dimensions: t.exposeInt('dimensions'),
      embeddingModel: t.exposeString('embeddingModel'),
      indexKind: t.exposeString('indexKind'),
      reembedding: t.exposeBoolean('reembedding'),
    }),
  });

  const KnowledgeBaseRef = builder.objectRef<KnowledgeBase>('KnowledgeBase').implement({
    fields: (t) => ({
      id: t.exposeID('id'),
      name: t.exposeString('name'),
      temperature: t.exposeFloat('temperature'),
      maxTokens: t.exposeInt('maxTokens'),
      chunkSize: t.exposeInt('chunkSize'),
      chunkOverlap: t.exposeInt('chunkOverlap'),
      retrievalDepth: t.exposeInt('retrievalDepth'),
      language: t.exposeString('language'),
      embeddingModel: t.string({ resolve: (kb) => kb.embedding.model }),
      languageModel: t.string({ nullable: true, resolve: (kb) => kb.llm?.model ?? null }),
      reembedding: t.boolean({ resolve: (kb) => kb.embeddingStatus.reembedding }),
      createdAt: t.field({ type: 'DateTime', resolve: (kb) => kb.createdAt }),
      documents: t.field({
        type: [KbDocumentRef],
        resolve: async (kb, _args, ctx) => (await call(ctx, (c) => c.knowledgeBase.documents.list({ configId: kb.id }))).documents,
      }),
      documentCounts: t.field({
        type: builder.objectRef<{ processing: number; completed: number; failed: number }>('DocumentCounts').implement({
          fields: (f) => ({ processing: f.exposeInt('processing'), completed: f.exposeInt('completed'), failed: f.exposeInt('failed') }),
        }),
        resolve: async (kb, _args, ctx) => {
          const { documents } = await call(ctx, (c) => c.knowledgeBase.documents.list({ configId: kb.id }));
          const count = (status: string) => documents.filter((d) => d.status === status).length;
          return { processing: count('processing'), completed: count('completed'), failed: count('failed') };
        },
      }),
    }),
  });

  const WebhookStatsRef = builder.objectRef<Webhook['stats']>('WebhookStats').implement({
    description: 'Delivery statistics of one endpoint, for dashboards',
    fields: (t) => ({
      deliveries: t.exposeInt('deliveries'),
      succeeded: t.exposeInt('succeeded'),
      failed: t.exposeInt('failed', { description: 'Deliveries whose last attempt failed (retrying or exhausted)' }),
      pending: t.exposeInt('pending'),
      successRate: t.exposeFloat('successRate', { nullable: true, description: 'succeeded / (succeeded + failed); null before any outcome' }),
      lastFailureAt: t.field({ type: 'DateTime', nullable: true, resolve: (s) => s.lastFailureAt }),
      lastFailureStatus: t.exposeInt('lastFailureStatus', { nullable: true }),
      lastSuccessAt: t.field({ type: 'DateTime', nullable: true, resolve: (s) => s.lastSuccessAt }),
    }),
  });

  const WebhookDeliveryRef = builder.objectRef<WebhookDelivery>('WebhookDelivery').implement({
    fields: (t) => ({
      deliveryId: t.exposeID('deliveryId'),
      eventId: t.exposeID('eventId'),
      eventType: t.exposeString('eventType'),
      status: t.exposeString('status', { description: 'pending, succeeded, failed or exhausted' }),
      attemptCount: t.exposeInt('attemptCount'),
      lastHttpStatus: t.exposeInt('lastHttpStatus', { nullable: true }),
      nextAttemptAt: t.field({ type: 'DateTime', nullable: true, resolve: (d) => d.nextAttemptAt }),
      createdAt: t.field({ type: 'DateTime', resolve: (d) => d.createdAt }),
    }),
  });

  const WebhookRef = builder.objectRef<Webhook>('Webhook').implement({
    description: 'An enterprise webhook endpoint (its secret is never exposed)',
    fields: (t) => ({
      id: t.exposeID('id'),
      url: t.exposeString('url'),
      description: t.exposeString('description', { nullable: true }),
      events: t.exposeStringList('events'),
      enabled: t.exposeBoolean('enabled'),
      disabledReason: t.exposeString('disabledReason', { nullable: true }),
      disabledAt: t.field({ type: 'DateTime', nullable: true, resolve: (w) => w.disabledAt }),
      failingSince: t.field({ type: 'DateTime', nullable: true, resolve: (w) => w.failingSince }),
      createdAt: t.field({ type: 'DateTime', resolve: (w) => w.createdAt }),
      stats: t.field({ type: WebhookStatsRef, resolve: (w) => w.stats }),
      recentDeliveries: t.field({
        type: [WebhookDeliveryRef],
        args: { limit: t.arg.int({ required: false, description: '1 to 100, default 20' }) },
        resolve: async (w, args, ctx) => (await call(ctx, (c) => c.webhooks.deliveries({ webhookId: w.id, limit: args.limit ?? 20 }))).deliveries,
      }),
    }),
  });

  builder.queryType({
    fields: (t) => ({
      me: t.field({ type: OwnerRef, resolve: async (_root, _args, ctx) => (await call(ctx, (c) => c.auth.me())).owner }),
      chatInterfaces: t.field({
        type: [ChatInterfaceRef],
        resolve: async (_root, _args, ctx) => (await call(ctx, (c) => c.chatInterfaces.list())).chatInterfaces,
      }),
      chatInterface: t.field({
        type: ChatInterfaceRef,
        args: { id: t.arg.id({ required: true }) },
        resolve: async (_root, args, ctx) => (await call(ctx, (c) => c.chatInterfaces.get({ id: String(args.id) }))).chatInterface,
      }),
      apiKeys: t.field({ type: [ApiKeyRef], resolve: async (_root, _args, ctx) => (await call(ctx, (c) => c.apiKeys.list())).apiKeys }),
      knowledgeBases: t.field({
        type: [KnowledgeBaseRef],
        resolve: async (_root, _args, ctx) => (await call(ctx, (c) => c.knowledgeBase.configs.list())).configs,
      }),
      knowledgeBase: t.field({
        type: KnowledgeBaseRef,
        args: { id: t.arg.id({ required: true }) },
        resolve: async (_root, args, ctx) => (await call(ctx, (c) => c.knowledgeBase.configs.get({ id: String(args.id) }))).config,
      }),
      documents: t.field({
        type: [KbDocumentRef],
        args: { configId: t.arg.id({ required: true }) },
        resolve: async (_root, args, ctx) => (await call(ctx, (c) => c.knowledgeBase.documents.list({ configId: String(args.configId) }))).documents,
      }),
      webhooks: t.field({
        type: [WebhookRef],
        description: 'Enterprise accounts: webhook endpoints with delivery statistics',
        resolve: async (_root, _args, ctx) => (await call(ctx, (c) => c.webhooks.list())).webhooks,
      }),
      webhook: t.field({
        type: WebhookRef,
        args: { id: t.arg.id({ required: true }) },
        resolve: async (_root, args, ctx) => (await call(ctx, (c) => c.webhooks.get({ webhookId: String(args.id) }))).webhook,
      }),
      collections: t.field({
        type: [KbCollectionRef],
        resolve: async (_root, _args, ctx) => (await call(ctx, (c) => c.knowledgeBase.ask.collections())).collections,
      }),
    }),
  });
  addReportingFields(builder, call);

  return builder.toSchema();
}
