package ddblimits

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func bin(b []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: b} }
func num(n int) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.Itoa(n)}
}

func TestValueSize(t *testing.T) {
	t.Parallel()
	t.Run("FollowsPublishedRules", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name string
			v    types.AttributeValue
			want int
		}{
			{"string counts UTF-8 bytes", str("héllo"), 6},
			{"empty string", str(""), 0},
			{"binary counts bytes", bin([]byte{1, 2, 3}), 3},
			{"three digits", num(123), 3},
			{"trailing zeros are free", num(1000), 2},
			{"zero", num(0), 2},
			{"tick value, 18 digits", &types.AttributeValueMemberN{Value: "638687712000000001"}, 10},
			{"negative decimal", &types.AttributeValueMemberN{Value: "-1.50"}, 3},
			{"bool", &types.AttributeValueMemberBOOL{Value: true}, 1},
			{"null", &types.AttributeValueMemberNULL{Value: true}, 1},
			{"string set", &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}, 3},
			{"empty list", &types.AttributeValueMemberL{}, 3},
			{"list", &types.AttributeValueMemberL{Value: []types.AttributeValue{str("a"), num(1)}}, 3 + (1 + 1) + (1 + 2)},
			{"map", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": str("v")}}, 3 + 1 + 1 + 1},
		}
		for _, tc := range cases {
			if got := ValueSize(tc.v); got != tc.want {
				t.Errorf("%s: size %d, want %d", tc.name, got, tc.want)
			}
		}
		if got := ItemSize(map[string]types.AttributeValue{"PK": str("abc"), "N": num(12)}); got != 2+3+1+2 {
			t.Errorf("item size %d, want names plus values (8)", got)
		}
	})
}
