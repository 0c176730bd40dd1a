import type { AppDeps } from '../context.ts';
import type { TicketRow } from './repository.ts';

/**
 * The requester's proof of address for a hand-off. Anyone may sign up, give their own public interface's contact
 * form a stranger's address, and reply: without the proof, the stranger would get any text the owner wrote from
 * the service's address (an attack pass did so, three mails in a row). So a hand-off's replies wait until the
 * requester opens the link in their confirmation mail; tickets to the admins need none (the admins run the service).
 *
 * The token is derived from the ticket id with the service key, so the mail job writes the link when it sends (the
 * token is in no job); the database keeps only its hash for the lookup. It sits in the link's fragment, which browsers never send to a
 * server, and the page posts it: opening the link (as mail scanners do) confirms nothing.
 */
export const confirmTokenOf = (deps: Pick<AppDeps, 'secrets'>, ticketId: string) => `stc_${deps.secrets.sign('support-confirm', ticketId)}`;

/** The page that confirms (web/support/confirm.ts); the token follows in the fragment. */
export const CONFIRM_PAGE_PATH = '/support/confirm';

/** Whether a reply to this ticket is mailed when written: the admins' tickets always, a hand-off once confirmed. */
export const repliesAreMailed = (ticket: Pick<TicketRow, 'owner_id' | 'requester_confirmed_at'>) =>
  ticket.owner_id === null || ticket.requester_confirmed_at !== null;

/**
 * The requester's confirmation: the reference and fixed text only (the address is not verified yet, so none of the
 * sender's words go to it), and for a hand-off the link that lets replies through. Links are on the first of
 * PUBLIC_ORIGINS; without it the mail says replies come by other means (the owner sees the address unconfirmed).
 */
export function confirmationMailText(reference: string, link: string | null, handOff: boolean): string {
  const lines = [`Hello,`, ``, `Thank you for writing. Your reference is ${reference}.`];
  if (!handOff) lines.push(`We will answer by e-mail.`);
  else if (link) lines.push(``, `To receive the answers by e-mail, confirm that this address is yours:`, link);
  else lines.push(`The team will get back to you.`);
  lines.push(``, `If you did not write to us, you can ignore this message.`);
  return lines.join('\n');
}
