import { useState } from 'preact/hooks';
import { ApiError, type FormConfig, type VisitorApi } from './api.ts';
import { errorKey, type Translate } from './i18n.ts';

/**
 * The lead-capture tool's form, as the owner configured it: real labelled inputs of the right types, the
 * browser's own required and e-mail checks, then the service's (which names the field it refuses).
 */
export function LeadForm({ config, t, api }: { config: FormConfig; t: Translate; api: VisitorApi }) {
  const fields = config.fields ?? [];
  const [values, setValues] = useState<Record<string, string>>({});
  const [state, setState] = useState<'editing' | 'sending' | 'sent'>('editing');
  const [problem, setProblem] = useState<string | null>(null);
  const formId = useState(() => `lead-${Math.random().toString(36).slice(2, 8)}`)[0];

  if (state === 'sent') {
    return (
      <p class="lead-thanks" role="status">
        {t('form.thanks', { name: values.name ?? '' }).replace(/,\s*!/, '!')}
      </p>
    );
  }

  return (
    <form
      class="lead-form"
      data-testid="lead-form"
      aria-labelledby={`${formId}-title`}
      onSubmit={async (event) => {
        event.preventDefault();
        setState('sending');
        setProblem(null);
        try {
          await api.submitLead(Object.fromEntries(Object.entries(values).filter(([, v]) => v.trim() !== '')));
          setState('sent');
        } catch (failure) {
          setState('editing');
          const code = failure instanceof ApiError ? failure.code : 'NETWORK';
          setProblem(t(errorKey(code)));
        }
      }}
    >
      <p class="lead-title" id={`${formId}-title`}>
        {config.title || t('form.title')}
      </p>
      {fields.map((field) => {
        const id = `${formId}-${field.name}`;
        const common = {
          id,
          name: field.name,
          required: field.required,
          // Own values only: a field may be named after an Object.prototype member (constructor, toString).
          value: Object.hasOwn(values, field.name) ? values[field.name] : '',
          onInput: (event: Event) => setValues({ ...values, [field.name]: (event.target as HTMLInputElement).value }),
        };
        return (
          <div class="field" key={field.name}>
            <label for={id}>
              {field.label}
              {field.required && <span aria-hidden="true"> *</span>}
            </label>
            {field.type === 'textarea' ? (
              <textarea {...common} rows={3} maxLength={2000} />
            ) : (
              <input {...common} type={field.type} maxLength={200} autoComplete={field.type === 'email' ? 'email' : field.type === 'tel' ? 'tel' : 'name'} />
            )}
          </div>
        );
      })}
      {problem && (
        <p class="error" role="alert">
          {problem}
        </p>
      )}
      <button type="submit" class="send" disabled={state === 'sending'}>
        {config.submitLabel || t('form.submit')}
      </button>
    </form>
  );
}
