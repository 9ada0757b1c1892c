"""Look inside a study: trace timeline (`show`), case studies and the integrity audit
(`cases`), the static HTML report (`report`)."""
