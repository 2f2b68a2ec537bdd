"""Exercises, the grader and its worker processes, the class tools (grade, leaderboard, release)."""
