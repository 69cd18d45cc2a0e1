// Package block holds helpers for raw block volumes: the target file a block
// volume is published on, bind-mounting a device node onto it, device sizes
// and loop devices.
package block
