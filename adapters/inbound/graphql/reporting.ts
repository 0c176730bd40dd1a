import type { AppRouter } from '../../../routers/app-router.ts';
import type { Context } from '../../../routers/context.ts';

type Caller = ReturnType<AppRouter['createCaller']>;
type Dashboard = Awaited<ReturnType<Caller['dashboard']['dashboard']>>;
type Monitoring = Awaited<ReturnType<Caller['dashboard']['monitoring']>>;
type Figures = Dashboard['series'][number];
type InterfaceHealth = Monitoring['interfaces'][number];

export type GraphqlBuilder = PothosSchemaTypes.SchemaBuilder<
  PothosSchemaTypes.ExtendDefaultTypes<{ Context: Context; Scalars: { DateTime: { Input: string; Output: string } } }>
>;
type Call = <T>(ctx: Context, run: (caller: Caller) => Promise<T>) => Promise<T>;

/**
 * The dashboard's and monitoring's figures for reporting tools: the same procedures as GET /api/v1/dashboard and
 * GET /api/v1/monitoring, with the date range, the interface and the grouping as arguments.
 */
export function addReportingFields(builder: GraphqlBuilder, call: Call) {
  const Grouping = builder.enumType('ReportGrouping', { values: ['day', 'week', 'month'] as const, description: 'Length of each point of a series' });

  const figureFields = (t: PothosSchemaTypes.ObjectFieldBuilder<PothosSchemaTypes.ExtendDefaultTypes<{ Context: Context }>, Omit<Figures, 'period'>>) => ({
    conversations: t.exposeInt('conversations'),
    messages: t.exposeInt('messages'),
    replies: t.exposeInt('replies'),
    uniqueVisitors: t.exposeInt('uniqueVisitors'),
    tokensIn: t.exposeFloat('tokensIn'),
    tokensOut: t.exposeFloat('tokensOut'),
    knowledgeBaseQueries: t.exposeInt('knowledgeBaseQueries'),
    unanswered: t.exposeInt('unanswered', { description: 'Knowledge-base answers with no passage matching the words of the question' }),
    leads: t.exposeInt('leads'),
    bookings: t.exposeInt('bookings'),
  });
  const TotalsRef = builder.objectRef<Dashboard['totals']>('DashboardTotals').implement({ fields: (t) => figureFields(t as never) });
  const PointRef = builder.objectRef<Figures>('DashboardPoint').implement({
    fields: (t) => ({ period: t.exposeString('period', { description: 'First day of the period (UTC), YYYY-MM-DD' }), ...figureFields(t as never) }),
  });
  const QuestionRef = builder.objectRef<Dashboard['topUnansweredQuestions'][number]>('UnansweredQuestion').implement({
    fields: (t) => ({ question: t.exposeString('question'), count: t.exposeInt('count') }),
  });
  const DocumentsRef = builder.objectRef<Dashboard['documents']>('DocumentsByStatus').implement({
    fields: (t) => ({ processing: t.exposeInt('processing'), completed: t.exposeInt('completed'), failed: t.exposeInt('failed'), total: t.exposeInt('total') }),
  });
  const DashboardRef = builder.objectRef<Dashboard>('Dashboard').implement({
    description: 'As GET /api/v1/dashboard: read from rollups kept as traffic flows, days in UTC',
    fields: (t) => ({
      from: t.string({ resolve: (d) => d.range.from }),
      to: t.string({ resolve: (d) => d.range.to }),
      groupBy: t.field({ type: Grouping, resolve: (d) => d.range.groupBy }),
      chatInterfaceId: t.exposeString('chatInterfaceId', { nullable: true }),
      totals: t.field({ type: TotalsRef, resolve: (d) => d.totals }),
      series: t.field({ type: [PointRef], resolve: (d) => d.series }),
      topUnansweredQuestions: t.field({ type: [QuestionRef], resolve: (d) => d.topUnansweredQuestions }),
      documents: t.field({ type: DocumentsRef, resolve: (d) => d.documents }),
    }),
  });

  const ErrorsRef = builder.objectRef<InterfaceHealth['errors']>('UpstreamErrors').implement({
    fields: (t) => ({
      connection: t.exposeInt('connection'),
      timeout: t.exposeInt('timeout'),
      invalidResponse: t.int({ resolve: (e) => e.invalid_response }),
      auth: t.exposeInt('auth'),
      http: t.exposeInt('http'),
    }),
  });
  const InterfaceHealthRef = builder.objectRef<InterfaceHealth>('InterfaceHealth').implement({
    fields: (t) => ({
      chatInterfaceId: t.exposeID('chatInterfaceId'),
      name: t.exposeString('name'),
      backend: t.exposeString('backend'),
      calls: t.exposeInt('calls'),
      latencyP50Ms: t.exposeFloat('latencyP50Ms', { nullable: true }),
      latencyP95Ms: t.exposeFloat('latencyP95Ms', { nullable: true }),
      errorRate: t.exposeFloat('errorRate', { nullable: true }),
      errors: t.field({ type: ErrorsRef, resolve: (i) => i.errors }),
      rateLimited: t.exposeInt('rateLimited'),
    }),
  });
  const MonitoringRef = builder.objectRef<Monitoring>('Monitoring').implement({
    description: 'As GET /api/v1/monitoring',
    fields: (t) => ({
      from: t.string({ resolve: (m) => m.range.from }),
      to: t.string({ resolve: (m) => m.range.to }),
      interfaces: t.field({ type: [InterfaceHealthRef], resolve: (m) => m.interfaces }),
      documentsFailed: t.int({ resolve: (m) => m.documents.failed }),
      webhooksDelivered: t.int({ resolve: (m) => m.webhooks.delivered }),
      webhooksFailed: t.int({ resolve: (m) => m.webhooks.failed }),
      webhookSuccessRate: t.float({ nullable: true, resolve: (m) => m.webhooks.successRate }),
      documentsProcessing: t.int({ resolve: (m) => m.backlog.documentsProcessing }),
      webhookDeliveriesPending: t.int({ resolve: (m) => m.backlog.webhookDeliveriesPending }),
    }),
  });

  builder.queryFields((t) => {
    const rangeArgs = {
      from: t.arg.string({ required: false, description: 'First day (UTC), YYYY-MM-DD or an instant; default 29 days before `to`' }),
      to: t.arg.string({ required: false, description: 'Last day (UTC), included; default today' }),
      chatInterfaceId: t.arg.id({ required: false }),
    };
    const rangeOf = (args: { from?: string | null; to?: string | null; chatInterfaceId?: string | number | null }) => ({
      ...(args.from ? { from: args.from } : {}),
      ...(args.to ? { to: args.to } : {}),
      ...(args.chatInterfaceId ? { chatInterfaceId: String(args.chatInterfaceId) } : {}),
    });
    return {
      dashboard: t.field({
        type: DashboardRef,
        args: { ...rangeArgs, groupBy: t.arg({ type: Grouping, required: false }) },
        resolve: (_root, args, ctx) => call(ctx, (c) => c.dashboard.dashboard({ ...rangeOf(args), groupBy: args.groupBy ?? 'day' })),
      }),
      monitoring: t.field({
        type: MonitoringRef,
        args: rangeArgs,
        resolve: (_root, args, ctx) => call(ctx, (c) => c.dashboard.monitoring(rangeOf(args))),
      }),
    };
  });
}
