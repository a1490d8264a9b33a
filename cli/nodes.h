/*  cli/nodes.h — `switchboard nodes`: the nodes of a cluster on PostgreSQL. */
#ifndef SB_CLI_NODES_H_INCLUDED
#define SB_CLI_NODES_H_INCLUDED

int sb_cmd_nodes (int argc, char **argv);

#endif
