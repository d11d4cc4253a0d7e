"""Placeholder until recommender.recommendation lands."""
import streamlit as st

st.title("ranking")
st.info("Needs the recommendation API.")
