import { useState } from 'preact/hooks';
import { ApiError, type StoredMessage, type ToolCall, type VisitorApi } from './api.ts';
import { errorKey, type Translate } from './i18n.ts';

interface Slot {
  start: string;
  end: string;
}

/**
 * The booking tool's offer: the free slots as buttons in the visitor's own time zone; picking one asks for name
 * and e-mail (the browser checks them, then the service), books it, and the conversation shows the confirmation.
 * A slot taken meanwhile (409) says so and leaves the others to pick.
 */
export function BookingOffer({
  call,
  t,
  locale,
  api,
  onBooked,
}: {
  call: ToolCall;
  t: Translate;
  locale: string;
  api: VisitorApi;
  onBooked: (message: StoredMessage | null) => void;
}) {
  const slots = (call.arguments.slots ?? []) as Slot[];
  const timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const format = new Intl.DateTimeFormat(locale, { weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit', timeZone });
  const [picked, setPicked] = useState<Slot | null>(null);
  const [taken, setTaken] = useState<string[]>([]);
  const [values, setValues] = useState({ name: '', email: '', phone: '' });
  const [state, setState] = useState<'picking' | 'sending' | 'booked'>('picking');
  const [problem, setProblem] = useState<string | null>(null);
  const formId = useState(() => `booking-${Math.random().toString(36).slice(2, 8)}`)[0];

  if (state === 'booked') return null;
  const open = slots.filter((slot) => !taken.includes(slot.start));
  const input = (name: 'name' | 'email' | 'phone', type: string, required: boolean, autoComplete: string) => (
    <div class="field">
      <label for={`${formId}-${name}`}>
        {t(`booking.${name}`)}
        {required && <span aria-hidden="true"> *</span>}
      </label>
      <input
        id={`${formId}-${name}`}
        name={name}
        type={type}
        required={required}
        maxLength={200}
        autoComplete={autoComplete}
        value={values[name]}
        onInput={(event) => setValues({ ...values, [name]: (event.target as HTMLInputElement).value })}
      />
    </div>
  );

  return (
    <div class="slots" data-testid="booking-slots">
      <p class="slots-title">{open.length > 0 ? t('booking.pickSlot') : t('booking.noSlots')}</p>
      <ul>
        {open.map((slot) => (
          <li key={slot.start}>
            <button
              type="button"
              class={`slot${picked?.start === slot.start ? ' picked' : ''}`}
              aria-pressed={picked?.start === slot.start}
              onClick={() => {
                setPicked(slot);
                setProblem(null);
              }}
            >
              {format.format(new Date(slot.start))}
            </button>
          </li>
        ))}
      </ul>
      {picked && (
        <form
          class="lead-form"
          data-testid="booking-form"
          aria-labelledby={`${formId}-title`}
          onSubmit={async (event) => {
            event.preventDefault();
            setState('sending');
            setProblem(null);
            try {
              const phone = values.phone.trim();
              const message = await api.book({
                start: picked.start,
                attendee: { name: values.name.trim(), email: values.email.trim(), timeZone, ...(phone ? { phone } : {}) },
              });
              setState('booked');
              onBooked(message);
            } catch (failure) {
              setState('picking');
              const code = failure instanceof ApiError ? failure.code : 'NETWORK';
              if (code === 'CONFLICT') {
                setTaken([...taken, picked.start]);
                setPicked(null);
                setProblem(t('booking.taken'));
              } else {
                setProblem(t(errorKey(code)));
              }
            }
          }}
        >
          <p class="lead-title" id={`${formId}-title`}>
            {format.format(new Date(picked.start))}
          </p>
          {input('name', 'text', true, 'name')}
          {input('email', 'email', true, 'email')}
          {input('phone', 'tel', false, 'tel')}
          <button type="submit" class="send" disabled={state === 'sending'}>
            {t('booking.confirm')}
          </button>
        </form>
      )}
      {problem && (
        <p class="error" role="alert">
          {problem}
        </p>
      )}
    </div>
  );
}
