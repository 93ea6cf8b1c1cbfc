// Progressive enhancement: filters apply as soon as they change (the button still works
// without JavaScript).
document.querySelectorAll("form.filters select, form.filters input[type=checkbox]").forEach((el) => {
  el.addEventListener("change", () => el.form.submit());
});
