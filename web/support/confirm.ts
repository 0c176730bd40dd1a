import { runTokenForm } from '../shared/token-form.ts';

/** The support requester's address confirmation (/support/confirm#<token>): see runTokenForm. */
runTokenForm<{ ticket: { reference: string } }>({
  formId: 'confirm-form',
  statusId: 'confirm-status',
  pattern: /^stc_[A-Za-z0-9_-]{10,}$/,
  incomplete: 'This confirmation link is incomplete. Please open the link from your e-mail again.',
  endpoint: '/api/v1/support/confirm',
  body: (_form, token) => ({ token }),
  notFound: 'We could not find this request. It may have been removed.',
  done: ({ ticket }) => `Thank you. The answers to ${ticket.reference} will come to this address by e-mail.`,
});
