// Tributary dashboard: the little script the pages need. Everything works without it; it adds
// copy buttons, reads a chosen CSV file into the import form, and submits the app switcher.
'use strict';
document.addEventListener('click', async (event) => {
  const button = event.target.closest('[data-copy]');
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  if (!source) return;
  const text = 'value' in source ? source.value : source.textContent;
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    if (source.select) source.select();
    document.execCommand('copy');
  }
  const label = button.textContent;
  button.textContent = 'Copied';
  setTimeout(() => { button.textContent = label; }, 1500);
});

document.addEventListener('change', (event) => {
  const input = event.target;
  if (input.matches('input[type=file][data-into]')) {
    const target = document.querySelector(input.dataset.into);
    const file = input.files && input.files[0];
    if (!target || !file) return;
    const reader = new FileReader();
    reader.onload = () => { target.value = reader.result; target.dispatchEvent(new Event('input')); };
    reader.readAsText(file);
  }
  if (input.matches('select[data-submit]')) input.form.submit();
});

// The survey builder (survey_form.rs). "Add rule" buttons copy the last row of their list,
// blank, with fresh ids. The live preview posts the form to the page's preview URL on every
// change and hands the answer to the tracker's popover (analytics.js with data-preview).
document.querySelectorAll('[data-add-row]').forEach((b) => { b.hidden = false; });
document.addEventListener('click', (event) => {
  const button = event.target.closest('[data-add-row]');
  if (!button) return;
  const rows = button.parentElement.querySelectorAll(`.rule-row[data-rule="${button.dataset.addRow}"]`);
  const last = rows[rows.length - 1];
  const row = last.cloneNode(true);
  const n = rows.length;
  row.querySelectorAll('.field-error').forEach((e) => e.remove());
  row.querySelectorAll('.invalid').forEach((e) => e.classList.remove('invalid'));
  row.querySelectorAll('input, select').forEach((input) => {
    input.id = input.id.replace(/-\d+-/, `-${n}-`);
    input.setAttribute('aria-label', input.getAttribute('aria-label').replace(/\d+:/, `${n + 1}:`));
    input.removeAttribute('aria-invalid');
    input.removeAttribute('aria-describedby');
    if (input.tagName === 'INPUT') input.value = '';
  });
  last.after(row);
  row.querySelector('input, select').focus();
});

const preview = document.querySelector('[data-survey-preview]');
if (preview) {
  const form = document.getElementById('survey-form');
  const host = preview.querySelector('.preview-host');
  let timer = 0;
  let asked = 0;
  const draw = async () => {
    const n = ++asked;
    const res = await fetch(preview.dataset.surveyPreview, {
      method: 'POST', body: new URLSearchParams(new FormData(form)), credentials: 'same-origin',
    });
    if (!res.ok || n !== asked) return;
    const survey = await res.json();
    if (window.Service && window.Service.surveyPreview) {
      window.Service.surveyPreview(survey, host);
      preview.dataset.drawn = String(n);
    }
  };
  const later = () => { clearTimeout(timer); timer = setTimeout(draw, 150); };
  form.addEventListener('input', later);
  form.addEventListener('change', later);
  document.addEventListener('DOMContentLoaded', draw);
}
