import { router } from './trpc.ts';
import { adminRouter } from './admin/router.ts';
import { apiKeysRouter } from './api-keys/router.ts';
import { authRouter } from './auth/router.ts';
import { billingRouter } from './billing/router.ts';
import { billingAdminRouter } from './billing/admin-router.ts';
import { bookingsRouter } from './bookings/router.ts';
import { bookingsVisitorRouter } from './bookings/visitor-router.ts';
import { domainsRouter } from './domains/router.ts';
import { domainsAdminRouter } from './domains/admin-router.ts';
import { cacheRouter } from './cache/router.ts';
import { chatRouter } from './chat/router.ts';
import { chatInterfacesRouter } from './chat-interfaces/router.ts';
import { dashboardRouter } from './dashboard/router.ts';
import { debugRouter } from './debug/router.ts';
import { errorTrackingRouter } from './error-tracking/router.ts';
import { healthRouter } from './health/router.ts';
import { knowledgeBaseRouter } from './knowledge-base/router.ts';
import { leadsRouter } from './leads/router.ts';
import { securityEventsRouter } from './security-events/router.ts';
import { supportRouter } from './support/router.ts';
import { toolhubRouter } from './toolhub/router.ts';
import { translationsRouter } from './translations/router.ts';
import { userRouter } from './user/router.ts';
import { visitorsRouter } from './visitors/router.ts';
import { webhooksRouter } from './webhooks/router.ts';

/** Every area is one router folder; adding an area is one line here. */
export const appRouter = router({
  auth: authRouter,
  billing: billingRouter,
  billingAdmin: billingAdminRouter,
  bookings: bookingsRouter,
  bookingsVisitor: bookingsVisitorRouter,
  domains: domainsRouter,
  domainsAdmin: domainsAdminRouter,
  admin: adminRouter,
  apiKeys: apiKeysRouter,
  chatInterfaces: chatInterfacesRouter,
  cache: cacheRouter,
  chat: chatRouter,
  dashboard: dashboardRouter,
  debug: debugRouter,
  errorTracking: errorTrackingRouter,
  health: healthRouter,
  knowledgeBase: knowledgeBaseRouter,
  leads: leadsRouter,
  securityEvents: securityEventsRouter,
  support: supportRouter,
  toolhub: toolhubRouter,
  translations: translationsRouter,
  user: userRouter,
  visitors: visitorsRouter,
  webhooks: webhooksRouter,
});

/** The type first-party apps import for their typed tRPC client. */
export type AppRouter = typeof appRouter;
