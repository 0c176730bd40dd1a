/**
 * The attendee's cancellation page (/bookings/cancel#<token>). The token sits in the URL fragment, which the
 * browser never sends to a server or in a Referer; it goes to the service only in the body of the POST, and
 * nothing is cancelled by merely opening the link (mail scanners follow links).
 */
const root = document.getElementById('cancel-root');
const form = document.getElementById('cancel-form') as HTMLFormElement | null;
const status = document.getElementById('cancel-status');
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

if (root && form && status) {
  if (!/^bkc_[A-Za-z0-9_-]{10,}$/.test(token)) {
    form.hidden = true;
    show('This cancellation link is incomplete. Please open the link from your confirmation e-mail again.');
  } else {
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const button = form.querySelector('button');
      if (button) button.disabled = true;
      const reason = (form.elements.namedItem('reason') as HTMLTextAreaElement | null)?.value.trim() ?? '';
      try {
        const response = await fetch('/api/v1/bookings/attendee-cancel', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(reason ? { token, reason } : { token }),
        });
        if (response.status === 404) {
          show('We could not find this booking. It may have been removed.');
        } else if (!response.ok) {
          show('Something went wrong. Please try again in a moment.');
          if (button) button.disabled = false;
          return;
        } else {
          const { data } = (await response.json()) as { data: { booking: { start: string } } };
          const when = new Intl.DateTimeFormat(navigator.language || 'en', { dateStyle: 'full', timeStyle: 'short' }).format(new Date(data.booking.start));
          show(`Your booking on ${when} is cancelled. Your calendar gets the cancellation by e-mail.`);
        }
        form.hidden = true;
      } catch {
        show('Unable to connect. Please check your internet connection.');
        if (button) button.disabled = false;
      }
    });
  }
}
