"""The Streamlit dashboard. It reads only through recommender's store and recommendation API; no SQL, no formulas.

Start it with `recommender dashboard [--db URL]`; `dashboard/app.py` is the Streamlit entry script and
`dashboard/views/` holds one script per page.
"""
