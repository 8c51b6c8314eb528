"""The self-contained HTML report (``page``) and its inline SVG charts (``charts``)."""
