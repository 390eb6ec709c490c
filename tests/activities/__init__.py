"""Tests of the activities and their pure builders."""
