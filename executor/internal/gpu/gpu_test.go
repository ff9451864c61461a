package gpu

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	ms, err := Parse("0, NVIDIA A100-SXM4-40GB, GPU-1234, 37, 12, 4096, 40960, 51, 88.25\n" +
		"1, NVIDIA A100-SXM4-40GB, GPU-5678, 0, 0, 1, 40960, 30, [N/A]\n")
	require.NoError(t, err)
	require.Len(t, ms, 2)
	require.Equal(t, "NVIDIA A100-SXM4-40GB", ms[0].Name)
	require.Equal(t, 37.0, *ms[0].UtilGPU)
	require.Equal(t, 88.25, *ms[0].PowerW)
	require.Equal(t, 1, ms[1].Index)
	require.Nil(t, ms[1].PowerW)

	_, err = Parse("0, only, three\n")
	require.Error(t, err)
}

func TestSampleWithoutNvidiaSMI(t *testing.T) {
	t.Parallel()
	_, err := Probe{Command: "no-such-nvidia-smi-here"}.Sample(context.Background())
	require.ErrorIs(t, err, ErrNoGPU)
}

func TestSampleRunsNvidiaSMI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := filepath.Join(dir, "nvidia-smi")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho '0, Fake GPU, GPU-0, 5, 1, 10, 100, 40, 20'\n"), 0o755))
	ms, err := Probe{Command: fake}.Sample(context.Background())
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, "Fake GPU", ms[0].Name)
}
