"""Reinforcement learning updates as libraries write them: PPO with GAE, DQN variants, SAC, A2C, soft target updates."""

from __future__ import annotations
