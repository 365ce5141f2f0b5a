"""Stub."""

import streamlit as st

st.title("bundles")
