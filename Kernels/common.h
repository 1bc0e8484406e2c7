// Shared helpers for every Updraft kernel file (included textually by the host).
#ifndef UPDRAFT_COMMON_H
#define UPDRAFT_COMMON_H
#endif
