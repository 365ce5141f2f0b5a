"""The page scripts, one per page; Streamlit runs each as ``__main__`` when its page is open.

Named ``views`` rather than ``pages``, which Streamlit would also auto-discover as a legacy multipage app.
"""
