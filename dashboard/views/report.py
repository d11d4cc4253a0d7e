"""Placeholder until recommender.recommendation lands."""
import streamlit as st

st.title("report")
st.info("Needs the recommendation API.")
