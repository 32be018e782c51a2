//! A faithful reimplementation of rt-tests hackbench (work in progress).
