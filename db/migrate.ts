import { Migrator, type Kysely, type Migration } from 'kysely';
import * as identity from './migrations/0001_identity.ts';
import * as knowledgeBase from './migrations/0002_knowledge_base.ts';
import * as chat from './migrations/0003_chat.ts';
import * as webhooks from './migrations/0004_webhooks.ts';
import * as hotPathFunctions from './migrations/0005_hot_path_functions.ts';
import * as apiKeyChangeNotify from './migrations/0006_api_key_change_notify.ts';
import * as visitors from './migrations/0007_visitors.ts';
import * as usage from './migrations/0008_usage.ts';
import * as billing from './migrations/0009_billing.ts';
import * as domains from './migrations/0010_domains.ts';
import * as certificates from './migrations/0011_certificates.ts';
import * as bookings from './migrations/0012_bookings.ts';
import * as toolhub from './migrations/0013_toolhub.ts';
import * as support from './migrations/0014_support.ts';
import * as activityRollups from './migrations/0015_activity_rollups.ts';
import * as securityEvents from './migrations/0016_security_events.ts';
import * as sessionChangeNotify from './migrations/0017_session_change_notify.ts';
import * as binaryVectors from './migrations/0018_binary_vectors.ts';
import * as chunkTerms from './migrations/0019_chunk_terms.ts';
import * as apiKeyListNotify from './migrations/0020_api_key_list_notify.ts';
import * as embeddingSwitchError from './migrations/0021_embedding_switch_error.ts';
import * as jobFairKey from './migrations/0022_job_fair_key.ts';
import * as kbDocumentContents from './migrations/0023_kb_document_contents.ts';
import * as interfaceDeleteGuard from './migrations/0024_interface_delete_guard.ts';
import * as subscriptionCreated from './migrations/0025_subscription_created.ts';
import * as openCheckout from './migrations/0026_open_checkout.ts';
import * as supportRequesterConfirmation from './migrations/0027_support_requester_confirmation.ts';

/** Migrations are listed in code (not read from a folder) so they run the same under tsx, tests and bundlers. */
const migrations: Record<string, Migration> = {
  '0001_identity': identity,
  '0002_knowledge_base': knowledgeBase,
  '0003_chat': chat,
  '0004_webhooks': webhooks,
  '0005_hot_path_functions': hotPathFunctions,
  '0006_api_key_change_notify': apiKeyChangeNotify,
  '0007_visitors': visitors,
  '0008_usage': usage,
  '0009_billing': billing,
  '0010_domains': domains,
  '0011_certificates': certificates,
  '0012_bookings': bookings,
  '0013_toolhub': toolhub,
  '0014_support': support,
  '0015_activity_rollups': activityRollups,
  '0016_security_events': securityEvents,
  '0017_session_change_notify': sessionChangeNotify,
  '0018_binary_vectors': binaryVectors,
  '0019_chunk_terms': chunkTerms,
  '0020_api_key_list_notify': apiKeyListNotify,
  '0021_embedding_switch_error': embeddingSwitchError,
  '0022_job_fair_key': jobFairKey,
  '0023_kb_document_contents': kbDocumentContents,
  '0024_interface_delete_guard': interfaceDeleteGuard,
  '0025_subscription_created': subscriptionCreated,
  '0026_open_checkout': openCheckout,
  '0027_support_requester_confirmation': supportRequesterConfirmation,
};

/** Runs pending migrations. Kysely's migrator holds a Postgres advisory lock, so concurrent instances are safe. */
export async function migrateToLatest(db: Kysely<any>) {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? '(unknown)'} failed: ${String((error as Error).message ?? error)}`);
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
