package cfgtest

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
)

type config struct {
	Interval time.Duration `mapstructure:"interval"`
	Name     string        `mapstructure:"name"`
}

func TestLoadUnmarshalsTheSectionOverTheDefaults(t *testing.T) {
	typ := component.MustNewType("example")
	for _, tt := range []struct {
		id   component.ID
		want config
	}{
		{component.NewID(typ), config{Interval: time.Second, Name: "default"}},
		{component.NewIDWithName(typ, "custom"), config{Interval: 5 * time.Second, Name: "default"}},
	} {
		t.Run(tt.id.String(), func(t *testing.T) {
			got := Load(t, tt.id, &config{Interval: time.Second, Name: "default"})
			if *got != tt.want {
				t.Errorf("Load(%v): got %+v, want %+v", tt.id, *got, tt.want)
			}
		})
	}
}
