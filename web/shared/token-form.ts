/**
 * A page that acts on the token in its link (/bookings/cancel#<token>, /support/confirm#<token>). The token sits in
 * the URL fragment, which the browser never sends to a server or in a Referer; it goes to the service only in the
 * body of the POST the page's button makes, and nothing happens by merely opening the link (mail scanners follow
 * links).
 */
export interface TokenFormPage<Answer> {
  formId: string;
  statusId: string;
  /** The token's shape; anything else is an incomplete link. */
  pattern: RegExp;
  incomplete: string;
  endpoint: string;
  /** The POST body: the token and what the form adds. */
  body(form: HTMLFormElement, token: string): Record<string, unknown>;
  notFound: string;
  /** What to say once it is done, from the answer's `data`. */
  done(data: Answer): string;
}

function tokenOfLink() {
  try {
    return decodeURIComponent(location.hash.slice(1));
  } catch {
    return '';
  }
}

export function runTokenForm<Answer>(page: TokenFormPage<Answer>): void {
  const form = document.getElementById(page.formId) as HTMLFormElement | null;
  const status = document.getElementById(page.statusId);
  if (!form || !status) return;
  const show = (text: string) => {
    status.textContent = text;
  };
  const token = tokenOfLink();
  if (!page.pattern.test(token)) {
    form.hidden = true;
    show(page.incomplete);
    return;
  }
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const button = form.querySelector('button');
    if (button) button.disabled = true;
    try {
      const response = await fetch(page.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(page.body(form, token)),
      });
      if (response.status === 404) {
        show(page.notFound);
      } else if (!response.ok) {
        show('Something went wrong. Please try again in a moment.');
        if (button) button.disabled = false;
        return;
      } else {
        const { data } = (await response.json()) as { data: Answer };
        show(page.done(data));
      }
      form.hidden = true;
    } catch {
      show('Unable to connect. Please check your internet connection.');
      if (button) button.disabled = false;
    }
  });
}
