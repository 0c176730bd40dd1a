import { useState } from 'preact/hooks';
import { ApiError, type VisitorApi } from './api.ts';
import { errorKey, type Translate } from './i18n.ts';

/**
 * "Talk to a person": name, e-mail and a message become a support ticket for the interface's owner, with this
 * conversation attached; the visitor is told the reference and that the answer comes by e-mail.
 */
export function HandoffForm({ t, api, onClose }: { t: Translate; api: VisitorApi; onClose: () => void }) {
  const [values, setValues] = useState({ name: '', email: '', message: '' });
  const [state, setState] = useState<'editing' | 'sending' | 'sent'>('editing');
  const [reference, setReference] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  if (state === 'sent') {
    return (
      <p class="lead-thanks" role="status" data-testid="handoff-sent">
        {t('handoff.sent', { reference })}
      </p>
    );
  }
  const field = (name: 'name' | 'email' | 'message', type: string) => (
    <div class="field">
      <label for={`handoff-${name}`}>
        {t(`handoff.${name}`)}
        <span aria-hidden="true"> *</span>
      </label>
      {type === 'textarea' ? (
        <textarea
          id={`handoff-${name}`}
          required
          rows={3}
          maxLength={5000}
          value={values[name]}
          onInput={(event) => setValues({ ...values, [name]: (event.target as HTMLTextAreaElement).value })}
        />
      ) : (
        <input
          id={`handoff-${name}`}
          type={type}
          required
          maxLength={200}
          autoComplete={name === 'email' ? 'email' : 'name'}
          value={values[name]}
          onInput={(event) => setValues({ ...values, [name]: (event.target as HTMLInputElement).value })}
        />
      )}
    </div>
  );
  return (
    <form
      class="lead-form handoff"
      data-testid="handoff-form"
      aria-labelledby="handoff-title"
      onSubmit={async (event) => {
        event.preventDefault();
        setState('sending');
        setProblem(null);
        try {
          setReference(await api.handOff({ name: values.name.trim(), email: values.email.trim(), message: values.message.trim() }));
          setState('sent');
        } catch (failure) {
          setState('editing');
          setProblem(t(errorKey(failure instanceof ApiError ? failure.code : 'NETWORK')));
        }
      }}
    >
      <p class="lead-title" id="handoff-title">
        {t('handoff.title')}
      </p>
      {field('name', 'text')}
      {field('email', 'email')}
      {field('message', 'textarea')}
      {problem && (
        <p class="error" role="alert">
          {problem}
        </p>
      )}
      <button type="submit" class="send" disabled={state === 'sending'}>
        {t('handoff.submit')}
      </button>
      <button type="button" class="header-button" onClick={onClose}>
        {t('handoff.cancel')}
      </button>
    </form>
  );
}
