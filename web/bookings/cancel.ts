import { runTokenForm } from '../shared/token-form.ts';

/** The attendee's cancellation page (/bookings/cancel#<token>): see runTokenForm. */
runTokenForm<{ booking: { start: string } }>({
  formId: 'cancel-form',
  statusId: 'cancel-status',
  pattern: /^bkc_[A-Za-z0-9_-]{10,}$/,
  incomplete: 'This cancellation link is incomplete. Please open the link from your confirmation e-mail again.',
  endpoint: '/api/v1/bookings/attendee-cancel',
  body(form, token) {
    const reason = (form.elements.namedItem('reason') as HTMLTextAreaElement | null)?.value.trim() ?? '';
    return reason ? { token, reason } : { token };
  },
  notFound: 'We could not find this booking. It may have been removed.',
  done({ booking }) {
    const when = new Intl.DateTimeFormat(navigator.language || 'en', { dateStyle: 'full', timeStyle: 'short' }).format(new Date(booking.start));
    return `Your booking on ${when} is cancelled. Your calendar gets the cancellation by e-mail.`;
  },
});
