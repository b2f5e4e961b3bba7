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
