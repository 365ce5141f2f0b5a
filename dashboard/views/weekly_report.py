"""Stub."""

import streamlit as st

st.title("weekly_report")
