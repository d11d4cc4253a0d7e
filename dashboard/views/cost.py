"""Placeholder until recommender.recommendation lands."""
import streamlit as st

st.title("cost")
st.info("Needs the recommendation API.")
