import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { headerText } from '../../adapters/outbound/mail/header-text.ts';
import { InvalidMailError } from '../../adapters/outbound/mail/mailer.ts';
import type { AppDeps } from '../context.ts';
import { CountedAttemptError, type JobHandler, PermanentJobError } from '../jobs/handler.ts';
import { CONFIRM_PAGE_PATH, confirmationMailText, confirmTokenOf } from './confirmation.ts';

export const SUPPORT_MAIL_JOB = 'support.mail';
type SupportMail = { to: string[]; subject: string; replyTo?: string } & (
  | { text: string }
  /** The requester's confirmation, written when sent: its link's token is rebuilt then, never stored in the job. */
  | { confirmation: { reference: string; handOffTicketId: string | null } }
);

/** Queued with the ticket change that causes it (retried with backoff while SMTP is down; logged when unset). */
export async function queueSupportMail(deps: Pick<AppDeps, 'mailJobs'>, trx: Transaction<DB> | Kysely<DB>, mail: SupportMail) {
  if (mail.to.length === 0) return;
  await deps.mailJobs.enqueue(SUPPORT_MAIL_JOB, mail, { maxAttempts: 10 }, trx);
}

/** The text of a queued mail; a confirmation's link is on the first of PUBLIC_ORIGINS as configured when it is sent. */
function textOf(deps: Pick<AppDeps, 'secrets' | 'config'>, mail: SupportMail): string {
  if ('text' in mail) return mail.text;
  const { reference, handOffTicketId } = mail.confirmation;
  const origin = deps.config.PUBLIC_ORIGINS[0];
  const link = handOffTicketId && origin ? `${origin}${CONFIRM_PAGE_PATH}#${confirmTokenOf(deps, handOffTicketId)}` : null;
  return confirmationMailText(reference, link, handOffTicketId !== null);
}

export function supportMailJobHandlers(deps: Pick<AppDeps, 'mailer' | 'secrets' | 'config'>): Record<string, JobHandler> {
  return {
    [SUPPORT_MAIL_JOB]: async (job, ctx) => {
      const mail = job.payload as SupportMail;
      const text = textOf(deps, mail);
      // Stopped before the send began: the job goes back uncounted.
      ctx.signal.throwIfAborted();
      try {
        // The subject holds the requester's and the owner's text: folded here, so jobs queued before inputs were
        // checked for line breaks still go.
        await deps.mailer.send(
          { to: mail.to, subject: headerText(mail.subject), text, ...(mail.replyTo ? { replyTo: mail.replyTo } : {}) },
          { signal: ctx.signal },
        );
      } catch (error) {
        // A message the mailer refuses is refused on every attempt: dead at once rather than retried for a day.
        if (error instanceof InvalidMailError) throw new PermanentJobError(error.message, { cause: error });
        // A send the stop cut short counts: a server that stalls every send would otherwise outlive every restart.
        if (ctx.signal.aborted) throw new CountedAttemptError(error instanceof Error ? error.message : String(error), { cause: error });
        throw error;
      }
    },
  };
}
