import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { AppDeps } from '../context.ts';
import type { JobHandler } from '../jobs/queue.ts';

export const SUPPORT_MAIL_JOB = 'support.mail';
interface SupportMail {
  to: string[];
  subject: string;
  text: string;
  replyTo?: string;
}

/** Queued with the ticket change that causes it (retried with backoff while SMTP is down; logged when unset). */
export async function queueSupportMail(deps: Pick<AppDeps, 'jobs'>, trx: Transaction<DB> | Kysely<DB>, mail: SupportMail) {
  if (mail.to.length === 0) return;
  await deps.jobs.enqueue(SUPPORT_MAIL_JOB, mail, { maxAttempts: 10 }, trx);
}

export function supportMailJobHandlers(deps: Pick<AppDeps, 'mailer'>): Record<string, JobHandler> {
  return {
    [SUPPORT_MAIL_JOB]: async (job) => {
      const mail = job.payload as SupportMail;
      await deps.mailer.send({ to: mail.to, subject: mail.subject, text: mail.text, ...(mail.replyTo ? { replyTo: mail.replyTo } : {}) });
    },
  };
}
