/**
 * The requester's confirmation page (/support/confirm#<token>). The token sits in the URL fragment, which the
 * browser never sends to a server or in a Referer; it goes to the service only in the body of the POST, and
 * nothing is confirmed by merely opening the link (mail scanners follow links).
 */
const form = document.getElementById('confirm-form') as HTMLFormElement | null;
const status = document.getElementById('confirm-status');
function tokenOfLink() {
  try {
    return decodeURIComponent(location.hash.slice(1));
  } catch {
    return '';
  }
}
const token = tokenOfLink();

function show(text: string) {
  if (status) status.textContent = text;
}

if (form && status) {
  if (!/^stc_[A-Za-z0-9_-]{10,}$/.test(token)) {
    form.hidden = true;
    show('This confirmation link is incomplete. Please open the link from your e-mail again.');
  } else {
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const button = form.querySelector('button');
      if (button) button.disabled = true;
      try {
        const response = await fetch('/api/v1/support/confirm', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ token }),
        });
        if (response.status === 404) {
          show('We could not find this request. It may have been removed.');
        } else if (!response.ok) {
          show('Something went wrong. Please try again in a moment.');
          if (button) button.disabled = false;
          return;
        } else {
          const { data } = (await response.json()) as { data: { ticket: { reference: string } } };
          show(`Thank you. The answers to ${data.ticket.reference} will come to this address by e-mail.`);
        }
        form.hidden = true;
      } catch {
        show('Unable to connect. Please check your internet connection.');
        if (button) button.disabled = false;
      }
    });
  }
}
