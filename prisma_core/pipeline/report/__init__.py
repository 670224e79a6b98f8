"""The report: one self-contained HTML file an analyst hands to people who will never open the app (no server, no
network: every style and picture is inside, and the page runs no script). `config` holds its settings (light: the
command line reads them for its flags), `contents` gathers what a run shows, `sections` turns it into the report's
sections (one small function each; SECTIONS lists them in order), `drawing` places the map's dots and the
comparison's ranges, `writer` renders the page (Jinja templates in `templates/`, every text escaped) and writes it."""
